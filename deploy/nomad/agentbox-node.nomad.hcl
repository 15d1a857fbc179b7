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
        AGENTBOX_NOMAD_NODE = "${node.unique.id}"
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
