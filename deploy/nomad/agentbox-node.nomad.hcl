# agentbox nodes: one on every Nomad client (a system job), running sandboxes and warm pools as a
# single machine does, found by the gateway through the Nomad service they register.
#
# raw_exec, because the node must run as root: the nano tier jails its workers with Linux
# namespaces and the heavy tier runs gVisor (runsc), which the exec and docker drivers' own
# isolation would get in the way of. So the clients enable raw_exec and run as root
# (plugin "raw_exec" { config { enabled = true } }). The exec driver is also slow here: it builds
# a chroot per task.
#
# The API key and the cluster token come from the Nomad variable nomad/jobs of the job's
# namespace (every job of that namespace may read it: give agentbox a namespace of its own),
# rendered into the task's secrets directory and its environment. See deploy/nomad/README.md.

variable "agentbox" {
  description = "Path of the agentbox binary on every client."
  type        = string
  default     = "/usr/local/bin/agentbox"
}

variable "data_dir" {
  description = "agentbox's data directory on each client: the runtimes (`agentbox setup` fills it), and under nodes/ID what the node owns."
  type        = string
  default     = "/var/lib/agentbox"
}

variable "shared_dir" {
  description = "Storage every node sees (an NFS mount, say): the sessions' durable snapshots, so another node can resume a session when its node is gone."
  type        = string
  default     = "/srv/agentbox-shared"
}

variable "store" {
  description = "The shared storage as a bucket of an S3-compatible server instead of shared_dir: s3://BUCKET/PREFIX (empty: shared_dir). See the s3_* variables."
  type        = string
  default     = ""
}

variable "s3_endpoint" {
  description = "The S3-compatible server's base URL, for an s3:// store (https://s3.eu-west-1.amazonaws.com, http://seaweedfs.service.consul:8333)."
  type        = string
  default     = ""
}

variable "s3_region" {
  description = "The region requests to the S3 server are signed for (default us-east-1)."
  type        = string
  default     = ""
}

variable "s3_path_style" {
  description = "\"1\": address the bucket as ENDPOINT/BUCKET (most self-hosted servers); empty: BUCKET.HOST."
  type        = string
  default     = ""
}

variable "s3_credentials_file" {
  description = "An AWS shared-credentials file on every client ([default] aws_access_key_id, aws_secret_access_key) for an s3:// store."
  type        = string
  default     = ""
}

variable "namespace" {
  description = "Nomad namespace of the job (and of the variable nomad/jobs holding the key)."
  type        = string
  default     = "agentbox"
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

variable "service" {
  description = "Nomad service the nodes register; the gateway's --discovery nomad:SERVICE names it."
  type        = string
  default     = "agentbox-node"
}

variable "memory_mb" {
  description = "Memory of a node's task (Nomad enforces it with the task's cgroup): the daemon and its nano workers (about 0.5 GB idle with the default pools). gVisor sandboxes have cgroups of their own."
  type        = number
  default     = 4096
}

variable "setup_args" {
  description = "Extra arguments of the prestart `agentbox setup` (e.g. [\"--source\", \"npm\"])."
  type        = list(string)
  default     = []
}

job "agentbox-node" {
  type        = "system"
  namespace   = var.namespace
  datacenters = var.datacenters

  group "node" {
    network {
      port "http" {}
    }

    # The gateway lists this service (internal/cluster/nomad); a node is healthy while this
    # check passes.
    service {
      name     = var.service
      provider = "nomad"
      port     = "http"
      check {
        type     = "http"
        path     = "/v1/health"
        interval = "2s"
        timeout  = "1s"
      }
    }

    restart {
      attempts = 5
      interval = "5m"
      delay    = "5s"
      mode     = "delay"
    }

    # Builds or checks what the runtimes run from (minutes the first time on a client, under a
    # second later).
    task "setup" {
      lifecycle {
        hook = "prestart"
      }
      driver = "raw_exec"
      config {
        command = var.agentbox
        args    = concat(["setup", "--data-dir", var.data_dir], var.setup_args)
      }
      resources {
        cpu    = 500
        memory = 512
      }
    }

    task "agentbox" {
      driver = "raw_exec"
      config {
        command = var.agentbox
        args    = ["serve", "--role", "node", "--listen", "${NOMAD_ADDR_http}", "--data-dir", var.data_dir]
      }
      env {
        AGENTBOX_ADVERTISE  = "http://${NOMAD_ADDR_http}"
        AGENTBOX_SHARED_DIR = var.shared_dir
        # An s3:// store, when set, is used instead of shared_dir (empty values are ignored).
        AGENTBOX_STORE               = var.store
        AGENTBOX_S3_ENDPOINT         = var.s3_endpoint
        AGENTBOX_S3_REGION           = var.s3_region
        AGENTBOX_S3_PATH_STYLE       = var.s3_path_style
        AGENTBOX_S3_CREDENTIALS_FILE = var.s3_credentials_file
        AGENTBOX_NOMAD_NODE          = "${node.unique.id}"
      }
      # The node's id is its Nomad client's id without the dashes (32 hex digits, as node ids
      # allow): stable across restarts of the task, and what the gateway's Nomad discovery reads
      # from the service registration.
      template {
        destination = "secrets/agentbox.env"
        env         = true
        change_mode = "restart"
        data        = <<-EOT
          AGENTBOX_NODE_ID={{ env "AGENTBOX_NOMAD_NODE" | replaceAll "-" "" }}
          {{ with nomadVar "nomad/jobs" }}AGENTBOX_API_KEY={{ .api_key }}
          AGENTBOX_CLUSTER_TOKEN={{ .cluster_token }}{{ end }}
          EOT
      }
      # SIGTERM lets running requests finish (serve's --shutdown-timeout, 30 s).
      kill_signal  = "SIGTERM"
      kill_timeout = "35s"
      resources {
        cpu    = 1000
        memory = var.memory_mb
      }
    }
  }
}
