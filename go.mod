module github.com/agentbox-dev/agentbox

go 1.26

require golang.org/x/sys v0.44.0 // indirect
