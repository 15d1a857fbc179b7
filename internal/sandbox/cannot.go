package sandbox

import (
	"fmt"
	"strings"
)

// hintSession tells the user of a session created with an explicit tier, whose run met what that
// tier cannot give, where the code would run: in the result's reasons and at the end of its
// stderr, where an agent reading the traceback sees it. The session itself stays where it is: the
// user asked for that tier.
func hintSession(res *Result, d *Decision, need Need, to Tier) {
	hint := fmt.Sprintf("this session was created with runtime %s; create it with runtime auto or %s to use %s", d.Tier, to, need.what())
	d.Reasons = append(d.Reasons, string(d.Tier)+": "+hint)
	if res.Stderr != "" && !strings.HasSuffix(res.Stderr, "\n") {
		res.Stderr += "\n"
	}
	res.Stderr += "[agentbox] " + hint + "\n"
}
