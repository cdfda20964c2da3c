// containerd-shim-runsc-v1 for the local cluster's real nodes: gVisor's own shim (its task
// service, Stop and Info unchanged), started by a Start that tolerates a machine without
// CAP_SYS_RESOURCE. gVisor's Start makes the new shim unkillable by the OOM killer
// (oom_score_adj -999) and fails the sandbox when the kernel refuses that; where the capability
// is missing (some CI sandboxes) the shim keeps containerd's score, as containerd's own runc
// shim would. The rest of Start follows gvisor.dev/gvisor pkg/shim/v1/manager.go (Apache 2.0,
// the gVisor authors), without shim grouping: one shim per container.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/containerd/v2/pkg/sys"
	"golang.org/x/sys/unix"
	gvisor "gvisor.dev/gvisor/pkg/shim/v1"
	// Registers gVisor's task service with containerd's shim framework.
	_ "gvisor.dev/gvisor/pkg/shim/v1/plugin"
)

// oomScoreMax is gVisor's choice for its shims: killable only as a last resort.
const oomScoreMax = -999

type manager struct {
	shim.Manager // gVisor's: Name, Stop, Info
}

func newCommand(ctx context.Context, id, containerdAddress string, debug bool) (*exec.Cmd, error) {
	ns, err := namespaces.NamespaceRequired(ctx)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	args := []string{"-namespace", ns, "-address", containerdAddress, "-id", id}
	if debug {
		args = append(args, "-debug")
	}
	cmd := exec.Command(self, args...)
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), "GOMAXPROCS=2")
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	return cmd, nil
}

func writeAddress(path, address string) error {
	return os.WriteFile(path, []byte(address), 0o644)
}

// Start implements shim.Manager.Start: a new shim process serving the task API on its socket.
func (m manager) Start(ctx context.Context, id string, opts shim.StartOpts) (_ shim.BootstrapParams, retErr error) {
	cmd, err := newCommand(ctx, id, opts.Address, opts.Debug)
	if err != nil {
		return shim.BootstrapParams{}, err
	}
	address, err := shim.SocketAddress(ctx, opts.Address, id, opts.Debug)
	if err != nil {
		return shim.BootstrapParams{}, err
	}
	socket, err := shim.NewSocket(address)
	if err != nil {
		if !shim.SocketEaddrinuse(err) {
			return shim.BootstrapParams{}, fmt.Errorf("create new shim socket: %w", err)
		}
		if shim.CanConnect(address) {
			if err := writeAddress("address", address); err != nil {
				return shim.BootstrapParams{}, fmt.Errorf("write existing socket for shim: %w", err)
			}
			return shim.BootstrapParams{Version: 2, Address: address, Protocol: "ttrpc"}, nil
		}
		if err := shim.RemoveSocket(address); err != nil {
			return shim.BootstrapParams{}, fmt.Errorf("remove pre-existing socket: %w", err)
		}
		if socket, err = shim.NewSocket(address); err != nil {
			return shim.BootstrapParams{}, fmt.Errorf("try create new shim socket 2x: %w", err)
		}
	}
	started := false
	defer func() {
		if retErr != nil {
			if started {
				_ = cmd.Process.Kill()
			}
			socket.Close()
			_ = shim.RemoveSocket(address)
		}
	}()
	if err := writeAddress("address", address); err != nil {
		return shim.BootstrapParams{}, err
	}
	f, err := socket.File()
	if err != nil {
		return shim.BootstrapParams{}, err
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	if err := cmd.Start(); err != nil {
		f.Close()
		return shim.BootstrapParams{}, err
	}
	started = true
	go func() { _ = cmd.Wait() }()
	if err := shim.WritePidFile("shim.pid", cmd.Process.Pid); err != nil {
		return shim.BootstrapParams{}, err
	}
	if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil {
		if !errors.Is(err, os.ErrPermission) {
			return shim.BootstrapParams{}, fmt.Errorf("failed to set OOM Score on shim: %w", err)
		}
		// Nothing is printed: containerd reads the bootstrap answer from `start`'s combined output.
	}
	return shim.BootstrapParams{Version: 2, Address: address, Protocol: "ttrpc"}, nil
}

func main() {
	shim.Run(context.Background(), manager{gvisor.NewShimManager("io.containerd.runsc.v1")})
}
