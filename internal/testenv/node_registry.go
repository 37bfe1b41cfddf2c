package testenv

import (
	"fmt"
	"os"
	"path/filepath"
)

// registryHosts is containerd's folder of per-registry settings
// (hosts.toml), which it reads at every pull, so a registry started after
// containerd can still be trusted.
func (n *Node) registryHosts() string { return filepath.Join(n.dir, "registry-hosts") }

// TrustRegistry lets the kubelet pull from the plain-HTTP registry at
// host (host:port), as a platform team's nodes are configured for their
// own registry: containerd otherwise speaks HTTPS to anything but
// localhost, and the registry the pods' images come from is on the node's
// bridge.
func (n *Node) TrustRegistry(host string) error {
	dir := filepath.Join(n.registryHosts(), host)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+host, "http://"+host)
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o600)
}
