package api

import "time"

// CreateVolumeRequest is the body of POST /v1/volumes.
type CreateVolumeRequest struct {
	// Name is 1 to 63 of a-z, 0-9, '_', '.', '-', starting with a letter or digit; unique within
	// the tenant.
	Name string `json:"name"`
	// QuotaBytes is the most the volume holds (its file system's size; its own metadata takes a
	// few percent). Default 256 MiB; at least 1 MiB.
	QuotaBytes int64 `json:"quota_bytes,omitempty"`
}

// Volume describes a named volume: a file system of the tenant's that outlives sessions and the
// daemon, mounted into heavy sessions (CreateSessionRequest.Volumes).
type Volume struct {
	Name       string    `json:"name"`
	QuotaBytes int64     `json:"quota_bytes"`
	CreatedAt  time.Time `json:"created_at"`
	// MountedRW and MountedRO count the sessions that mount it now.
	MountedRW int `json:"mounted_rw"`
	MountedRO int `json:"mounted_ro"`
}

// VolumeList is the body of GET /v1/volumes: the caller's tenant's volumes by name.
type VolumeList struct {
	Volumes []Volume `json:"volumes"`
}
