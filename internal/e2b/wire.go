package e2b

// The control plane's JSON, as E2B's OpenAPI spec (components.schemas) names it; only the fields
// agentbox reads or writes.

// newSandbox is NewSandbox / NewSandboxV2.
type newSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	AutoPause           *bool             `json:"autoPause"`
	AutoResume          *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
	VolumeMounts []struct {
		Name string `json:"name"`
		Path string `json:"path"`
	} `json:"volumeMounts"`
	Secure  *bool          `json:"secure"`
	Network map[string]any `json:"network"`
	MCP     map[string]any `json:"mcp"`
	IAM     map[string]any `json:"iam"`
}

// sandboxCreated is Sandbox: what create and connect answer.
type sandboxCreated struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken string  `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// volumeMount is SandboxVolumeMount.
type volumeMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// listedSandbox is ListedSandbox; sandboxDetail is SandboxDetail, which adds a few fields.
type listedSandbox struct {
	SandboxID    string            `json:"sandboxID"`
	TemplateID   string            `json:"templateID"`
	Alias        string            `json:"alias,omitempty"`
	ClientID     string            `json:"clientID"`
	StartedAt    string            `json:"startedAt"`
	EndAt        string            `json:"endAt"`
	CPUCount     int               `json:"cpuCount"`
	MemoryMB     int64             `json:"memoryMB"`
	DiskSizeMB   int64             `json:"diskSizeMB"`
	Metadata     map[string]string `json:"metadata"`
	State        string            `json:"state"`
	EnvdVersion  string            `json:"envdVersion"`
	VolumeMounts []volumeMount     `json:"volumeMounts"`
}

type sandboxDetail struct {
	listedSandbox
	AllowInternetAccess bool    `json:"allowInternetAccess"`
	Domain              *string `json:"domain"`
}

// timeoutBody is the body of setTimeout, connect and resume; refreshBody of refreshes.
type timeoutBody struct {
	Timeout *int64 `json:"timeout"`
	Memory  *bool  `json:"memory"`
}

type refreshBody struct {
	Duration *int64 `json:"duration"`
}
