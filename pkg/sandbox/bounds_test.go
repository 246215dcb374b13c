package sandbox

import "testing"

func TestParseAndFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		text string
	}{
		{"0", 0, "0 bytes"},
		{"100", 100, "100 bytes"},
		{"512M", 512 << 20, "512 MiB"},
		{"2G", 2 << 30, "2 GiB"},
		{"2GiB", 2 << 30, "2 GiB"},
		{"1536k", 1536 << 10, "1.5 MiB"},
		{"1t", 1 << 40, "1 TiB"},
	} {
		n, err := ParseBytes(tc.in)
		if err != nil || n != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tc.in, n, err, tc.want)
		}
		if got := FormatBytes(n); got != tc.text {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, tc.text)
		}
	}
	for _, bad := range []string{"", "G", "-1", "1.5G", "12X", "99999999999T"} {
		if n, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", bad, n)
		}
	}
}

// The sessions together get the capacity less the reserve, which grows
// with the number of sessions; no session gets more than all of them, and
// too many sessions for the capacity are refused with the limits named.
func TestPlanSessions(t *testing.T) {
	c := OwnCapacity()
	p, err := PlanSessions(10, SessionBounds{Processes: 1 << 30, Memory: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	if want := c.Tasks - reserveTasks - 10*reserveTasksPerSess; p.Total.Processes != want || p.PerSession.Processes != want {
		t.Errorf("tasks: total %d, per session %d; want both %d (capacity %d from %s)", p.Total.Processes, p.PerSession.Processes, want, c.Tasks, c.TasksFrom)
	}
	if want := c.Memory - reserveMemory - 10*reserveMemoryPerSess; p.Total.Memory != want || p.PerSession.Memory != want {
		t.Errorf("memory: total %d, per session %d; want both %d", p.Total.Memory, p.PerSession.Memory, want)
	}
	small, err := PlanSessions(10, SessionBounds{Processes: 100, Memory: 1 << 20})
	if err != nil || small.PerSession != (SessionBounds{Processes: 100, Memory: 1 << 20}) {
		t.Errorf("small bounds: %+v, %v; want them as asked", small.PerSession, err)
	}
	if _, err := PlanSessions(c.Tasks, SessionBounds{Processes: 1}); err == nil || SettingsOf(err) == nil {
		t.Errorf("%d sessions on %d tasks: %v; want a limits error", c.Tasks, c.Tasks, err)
	}
}
