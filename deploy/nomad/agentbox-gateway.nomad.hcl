# The agentbox gateway: stateless (a service job of as many as you like behind your load
# balancer), it authenticates clients, places runs and sessions on the nodes it finds through
# Nomad's service API (the nodes' job registers them), and proxies to them.
#
# It reads Nomad through the Task API (the unix socket in its secrets directory, with its workload
# identity): with ACLs enabled, give the job a policy that may read jobs in its namespace
# (`nomad acl policy apply -namespace agentbox -job agentbox-gateway ...`).

variable "agentbox" {
  description = "Path of the agentbox binary on every client."
  type        = string
  default     = "/usr/local/bin/agentbox"
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
  description = "Nomad service the nodes register (agentbox-node.nomad.hcl's service)."
  type        = string
  default     = "agentbox-node"
}

variable "port" {
  description = "Port the gateway listens on, on its client's address."
  type        = number
  default     = 8420
}

variable "count" {
  type    = number
  default = 1
}

job "agentbox-gateway" {
  type        = "service"
  namespace   = var.namespace
  datacenters = var.datacenters

  group "gateway" {
    count = var.count

    network {
      port "http" {
        static = var.port
      }
    }

    service {
      name     = "agentbox-gateway"
      provider = "nomad"
      port     = "http"
      check {
        type     = "http"
        path     = "/v1/health"
        interval = "2s"
        timeout  = "1s"
      }
    }

    update {
      min_healthy_time = "2s"
    }

    task "gateway" {
      driver = "raw_exec"
      config {
        command = var.agentbox
        args = ["serve", "--role", "gateway", "--discovery", "nomad:${var.service}",
        "--listen", "${NOMAD_ADDR_http}", "--data-dir", "${NOMAD_TASK_DIR}/data"]
      }
      identity {
        env = true
      }
      env {
        NOMAD_ADDR      = "unix://${NOMAD_SECRETS_DIR}/api.sock"
        NOMAD_NAMESPACE = var.namespace
      }
      template {
        destination = "secrets/agentbox.env"
        env         = true
        change_mode = "restart"
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs" }}AGENTBOX_API_KEY={{ .api_key }}
          AGENTBOX_CLUSTER_TOKEN={{ .cluster_token }}{{ end }}
          EOT
      }
      kill_signal  = "SIGTERM"
      kill_timeout = "35s"
      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
