package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/client"
)

// Run code once; a Python exception is part of the result, a limit is an *client.Error that
// still carries what the code printed.
func ExampleClient_Run() {
	c, err := client.FromEnv() // AGENTBOX_URL, AGENTBOX_API_KEY or the daemon's api_key file
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Run(context.Background(), api.RunRequest{Code: "print(6 * 7)", Timeout: 5})
	var apiErr *client.Error
	switch {
	case errors.As(err, &apiErr) && apiErr.Code == api.CodeTimeout:
		fmt.Print("too slow; printed so far: ", apiErr.Result.Stdout)
	case err != nil:
		log.Fatal(err)
	case res.Error != nil:
		fmt.Println("the code raised", res.Error.Name)
	default:
		fmt.Print(res.Stdout)
	}
}
