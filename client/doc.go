// Package client is the Go client of agentbox's HTTP API (api/openapi.yaml). It imports only
// the standard library and package api.
//
//	c, err := client.FromEnv()
//	if err != nil { ... }
//	res, err := c.Run(ctx, api.RunRequest{Code: "print(6*7)"})
//	var apiErr *client.Error
//	if errors.As(err, &apiErr) && apiErr.Code == api.CodeTimeout {
//		fmt.Print(apiErr.Result.Stdout) // what the code printed before the limit
//	}
//
// FromEnv finds the daemon and its key the way the agentbox CLI does:
//
//   - URL: AGENTBOX_URL, default http://127.0.0.1:8420.
//   - Key: AGENTBOX_API_KEY; if unset, the file api_key in the daemon's default data directory,
//     which is AGENTBOX_DATA_DIR if set, else the user's cache directory + "/agentbox"
//     ($XDG_CACHE_HOME/agentbox or ~/.cache/agentbox on Linux). `agentbox serve` creates that
//     file on first start, so a client run by the same user needs no setup. A daemon started
//     with --data-dir DIR keeps its key in DIR/api_key: set AGENTBOX_DATA_DIR=DIR or
//     AGENTBOX_API_KEY for its clients. When that file is absent too, the system install's
//     /var/lib/agentbox/api_key (SystemDataDir; scripts/install-system.sh makes it readable by
//     the group agentbox), so a member of that group reaches the agentbox service with no setup.
//
// Errors the API answers with are *Error values carrying the stable code, the message, the
// hint, the HTTP status and, when a limit ended a run, the partial result. Failures to reach
// the daemon are returned as they come from net/http (wrapped), so callers can tell "the daemon
// said no" from "no daemon".
package client
