package sandbox_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolwire/toolwire/pkg/sandbox"
)

// claimRuns counts runs of TestSharedUIDPoolClaimsRange in this process.
var claimRuns atomic.Int32

// claimHelperEnv makes the test binary claim a range ("first-last") and
// hold it until its stdin closes.
const claimHelperEnv = "TOOLWIRE_TEST_CLAIM_UIDS"

func claimHelper(spec string) {
	var r sandbox.UIDRange
	if _, err := fmt.Sscanf(spec, "%d-%d", &r.First, &r.Last); err != nil {
		fmt.Println("bad range:", err)
		os.Exit(1)
	}
	p, err := sandbox.SharedUIDPool(r)
	if err != nil {
		fmt.Println("claim:", err)
		os.Exit(1)
	}
	lease, err := p.Lease()
	if err != nil {
		fmt.Println("lease:", err)
		os.Exit(1)
	}
	fmt.Println("claimed", lease.ID())
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// Two executors handing out the same session ids would kill each other's
// calls (a session's end kills every process of its user): a range that
// overlaps another process's claim is refused, and free again once that
// process is gone. Within one process, one range is one shared pool.
func TestSharedUIDPoolClaimsRange(t *testing.T) {
	// Claims last as long as the process: each run (-count) takes ranges
	// of its own.
	base := 409600 + int(claimRuns.Add(1))*8192
	held := sandbox.UIDRange{First: base, Last: base + 2047}
	_, release := startClaimHelper(t, held)

	overlapping := sandbox.UIDRange{First: base + 1500, Last: base + 2999}
	_, err := sandbox.SharedUIDPool(overlapping)
	if !errors.Is(err, sandbox.ErrUIDRangeTaken) || !slices.Equal(sandbox.SettingsOf(err), []sandbox.Setting{sandbox.SettingSessionUIDs}) {
		t.Errorf("overlapping claim: %v (about %q), want ErrUIDRangeTaken about the session uid range", err, sandbox.SettingsOf(err))
	}
	if err := release(); err != nil {
		t.Fatalf("helper: %v", err)
	}

	p1, err := sandbox.SharedUIDPool(overlapping)
	if err != nil {
		t.Fatalf("claim after the other process ended: %v", err)
	}
	p2, err := sandbox.SharedUIDPool(overlapping)
	if err != nil || p2 != p1 {
		t.Errorf("second claim in one process: %p, %v; want the same pool %p", p2, err, p1)
	}
	if _, err := sandbox.SharedUIDPool(sandbox.UIDRange{First: base + 2000, Last: base + 3999}); err == nil {
		t.Error("an overlapping, different range in the same process was accepted")
	}
}

// Executors left at the default range share it: each process takes a
// block of its own, so their session users never coincide.
func TestSharedUIDPoolDefaultRangeSplits(t *testing.T) {
	def := sandbox.DefaultSessionUIDs
	theirs, release := startClaimHelper(t, def)
	defer release()
	p, err := sandbox.SharedUIDPool(def)
	if err != nil {
		t.Fatalf("default range with another process on it: %v", err)
	}
	lease, err := p.Lease()
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	ours := lease.ID()
	if ours/1024 == theirs/1024 || ours < def.First || ours > def.Last {
		t.Errorf("ids %d (ours) and %d (the other process's) share a block or leave %s", ours, theirs, def)
	}
}

// startClaimHelper starts this test binary as another process that claims
// r and holds it until release, which waits for it to exit. It returns the
// first id of the process's claim.
func startClaimHelper(t *testing.T, r sandbox.UIDRange) (first int, release func() error) {
	t.Helper()
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), claimHelperEnv+"="+r.String())
	stdin, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	release = func() error {
		stdin.Close()
		return helper.Wait()
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if _, err := fmt.Sscanf(line, "claimed %d", &first); err != nil {
		release()
		t.Fatalf("helper: %q", line)
	}
	return first, release
}

// A configured range smaller than the executor needs is refused up front,
// with both numbers.
func TestSharedUIDPoolRefusesARangeTooSmall(t *testing.T) {
	r := sandbox.UIDRange{First: 3_100_000, Last: 3_100_099}
	_, err := sandbox.SharedUIDPoolFor(r, 2064)
	if err == nil || !strings.Contains(err.Error(), "holds 100 ids; the executor needs 2064") {
		t.Fatalf("SharedUIDPoolFor(%s, 2064) = %v, want a refusal naming both sizes", r, err)
	}
}
