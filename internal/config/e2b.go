package config

import (
	"fmt"
	"os"
)

// E2BConfig configures the E2B front door (internal/e2b): the API E2B's official SDKs call, so
// that a program written for E2B runs against this daemon with E2B_DOMAIN and E2B_API_KEY
// changed. Off unless Domain or Listen is set.
type E2BConfig struct {
	// Domain is what the SDKs' E2B_DOMAIN names: the control plane is api.DOMAIN and a sandbox's
	// port PORT-SANDBOXID.DOMAIN (a wildcard DNS name and certificate point them here). The main
	// listener sends those names to the E2B front door too (behind a TLS proxy). Env
	// AGENTBOX_E2B_DOMAIN, flag --e2b-domain.
	Domain string `json:"domain"`
	// Listen is a listener of the E2B front door's own (every name there is E2B's: without a
	// wildcard name, point E2B_API_URL and E2B_SANDBOX_URL at it). Env AGENTBOX_E2B_LISTEN, flag
	// --e2b-listen.
	Listen string `json:"listen"`
	// TLSCert and TLSKey (PEM files) make Listen HTTPS, as the SDKs expect outside debug mode;
	// the certificate covers api.DOMAIN and *.DOMAIN. Env AGENTBOX_E2B_TLS_CERT and
	// AGENTBOX_E2B_TLS_KEY, flags --e2b-tls-cert and --e2b-tls-key.
	TLSCert string `json:"tls_cert"`
	TLSKey  string `json:"tls_key"`
	// Debug serves the SDKs' debug mode (E2B_DEBUG=true): loopback listeners on ports 3000
	// (control plane), 49983 (envd) and 49999 (code interpreter), where a process of root or of
	// the owner of the daemon's key file uses sandboxes without a credential, as the daemon's own
	// key (docs/E2B.md). Env AGENTBOX_E2B_DEBUG=1, flag --e2b-debug.
	Debug bool `json:"debug"`
	// Templates adds to or replaces the E2B templates: id → tier and image. The defaults map
	// "base" and "code-interpreter-v1" to the heavy tier's python-datascience image.
	Templates map[string]E2BTemplate `json:"templates"`
}

// E2BTemplate is what an E2B template id creates.
type E2BTemplate struct {
	Runtime string `json:"runtime"`
	Image   string `json:"image,omitempty"`
}

// Enabled says whether the E2B front door runs.
func (e E2BConfig) Enabled() bool { return e.Domain != "" || e.Listen != "" || e.Debug }

// fromEnv reads the E2B front door's environment variables.
func (e *E2BConfig) fromEnv() {
	for name, dst := range map[string]*string{
		"AGENTBOX_E2B_DOMAIN": &e.Domain, "AGENTBOX_E2B_LISTEN": &e.Listen,
		"AGENTBOX_E2B_TLS_CERT": &e.TLSCert, "AGENTBOX_E2B_TLS_KEY": &e.TLSKey,
	} {
		if v := os.Getenv(name); v != "" {
			*dst = v
		}
	}
	if v := os.Getenv("AGENTBOX_E2B_DEBUG"); v == "1" || v == "true" {
		e.Debug = true
	}
}

func (e E2BConfig) validate() error {
	if (e.TLSCert == "") != (e.TLSKey == "") {
		return fmt.Errorf("config: e2b.tls_cert and e2b.tls_key go together")
	}
	if e.TLSCert != "" && e.Listen == "" {
		return fmt.Errorf("config: e2b.tls_cert needs e2b.listen (the listener it serves)")
	}
	for id, t := range e.Templates {
		if t.Runtime == "" {
			return fmt.Errorf("config: e2b.templates[%q] names no runtime", id)
		}
	}
	return nil
}
