package dlp_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/dlp"
)

// A request carrying a card number is blocked with a reason the agent can read.
func ExampleScanner_ScanRequest_block() {
	s, err := dlp.New(dlp.Config{}) // DefaultActions: cards block
	if err != nil {
		panic(err)
	}
	r, _ := http.NewRequest("POST", "https://shop.example.com/api/orders",
		strings.NewReader(`{"payment":{"card":"4111 1111 1111 1111","exp":"12/29"}}`))
	r.Header.Set("Content-Type", "application/json")
	v, _ := s.ScanRequest(r)
	fmt.Println(v.Action)
	fmt.Println(v.Reason)
	fmt.Println(v.Findings[0].Excerpt)
	// Output:
	// block
	// blocked: a payment card number (Visa) in the JSON body field $.payment.card
	// {"payment":{"card":"[REDACTED:payment-card]","exp":"12/29"}}
}

// With the redact action the request goes on, rewritten: the origin never sees the key.
func ExampleScanner_ScanRequest_redact() {
	s, _ := dlp.New(dlp.Config{Actions: map[string]dlp.Action{dlp.DetectorSecret: dlp.ActionRedact}})
	r, _ := http.NewRequest("POST", "https://paste.example.com/new",
		strings.NewReader("title=notes&text=export+AWS_ACCESS_KEY_ID%3DAKIA5BQZ7XK4LMNR2TUV"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	v, _ := s.ScanRequest(r)
	body, _ := io.ReadAll(r.Body)
	fmt.Println(v.Reason)
	fmt.Println(string(body), r.ContentLength)
	// Output:
	// redacted: an AWS access key in the form field text; the request was sent with it replaced by [REDACTED:aws-access-token]
	// title=notes&text=export+AWS_ACCESS_KEY_ID%3D%5BREDACTED%3Aaws-access-token%5D 77
}
