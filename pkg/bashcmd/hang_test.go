package bashcmd
import ("testing";"time";"fmt";"os")
func FuzzHang(f *testing.F) {
	f.Add("ls")
	f.Fuzz(func(t *testing.T, line string) {
		tm := time.AfterFunc(3*time.Second, func(){ fmt.Fprintf(os.Stderr, "HANG %q\n", line); os.WriteFile("/tmp/hang.txt", []byte(line), 0644); os.Exit(3) })
		Commands(line); ReadOnly(line)
		tm.Stop()
	})
}
