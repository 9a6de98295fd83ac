package daemon_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// TestShellsInheritNoDescriptors starts the ahpd binary with descriptors
// 3, 4 and 5 inherited without close-on-exec (a file, both ends of a
// pipe), as a careless parent would leave them, and runs `ls /proc/self/fd`
// in a terminal: it sees 0, 1, 2 and its own directory's descriptor, 3
// (issue 12 §5).
func TestShellsInheritNoDescriptors(t *testing.T) {
	bin := buildBins(t, raceEnabled)
	dir := t.TempDir()
	leak, err := os.Create(filepath.Join(dir, "leaked-file"))
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	ns := newNotifySocket(t, dir)
	sock := filepath.Join(dir, "c.sock")
	cmd := exec.Command(filepath.Join(bin, "ahpd"), "--config", "none", "--listen", "127.0.0.1:0",
		"--state-dir", filepath.Join(dir, "state"), "--control", sock, "--no-default-terminal")
	cmd.Env = append(baseEnv(dir), "NOTIFY_SOCKET="+ns.path)
	cmd.ExtraFiles = []*os.File{leak, pr, pw} // fds 3, 4, 5 in ahpd, not close-on-exec
	p := startDaemon(t, cmd)
	ns.await(t, "READY=1", 30*time.Second)

	out := filepath.Join(dir, "fds")
	cc := grpcConn(t, sock)
	_, err = ahpv1.NewTerminalServiceClient(cc).CreateTerminal(ctxT(t), &ahpv1.CreateTerminalRequest{
		Id: "probe", Command: "/bin/sh",
		Args: []string{"-c", fmt.Sprintf("ls /proc/self/fd > %s.tmp; ls -l /proc/self/fd >> %s.tmp; mv %s.tmp %s", out, out, out, out)},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := waitFile(t, out)
	list, long, _ := strings.Cut(got, "total")
	if fds := strings.Fields(list); strings.Join(fds, " ") != "0 1 2 3" {
		t.Errorf("a terminal's ls /proc/self/fd lists %q, want 0 1 2 3 (3 is ls's own)\n%s", fds, got)
	}
	if strings.Contains(long, "leaked-file") || strings.Contains(long, "pipe:") {
		t.Errorf("a terminal inherited the daemon's descriptors:\n%s", got)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
}
