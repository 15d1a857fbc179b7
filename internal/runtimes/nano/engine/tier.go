package engine

import "github.com/agentbox-dev/agentbox/internal/sandbox"

// Tier is the nano tier's name, as requests ask for it and results report it. It lives here, at
// the bottom of nano's packages, so the engine, the worker and the runtime name it alike.
const Tier sandbox.Tier = "nano"
