package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A server outlives no test binary: when the binary is killed outright, as a
// -timeout panic or SIGKILL does, with no cleanup run, the kernel ends the
// server it started.
func TestAServerDiesWithItsTestBinary(t *testing.T) {
	if os.Getenv("TESTENV_HELPER") == "start-a-server" {
		proc, err := startProcess(exec.Command("sleep", "600"))
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString(strconv.Itoa(proc.cmd.Process.Pid) + "\n")
		<-proc.exited()
		return
	}
	binary := exec.Command(os.Args[0], "-test.run=^TestAServerDiesWithItsTestBinary$")
	binary.Env = append(os.Environ(), "TESTENV_HELPER=start-a-server")
	out, err := binary.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := binary.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = binary.Process.Kill()
		t.Fatalf("the helper named no server: %v", err)
	}
	server, _ := strconv.Atoi(strings.TrimSpace(line))
	if err := binary.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = binary.Wait()
	for deadline := time.Now().Add(10 * time.Second); alive(server); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(server, syscall.SIGKILL)
			t.Fatalf("server %d still runs 10 s after its test binary was killed", server)
		}
	}
}

// alive says whether pid runs; a zombie waiting to be reaped does not.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
