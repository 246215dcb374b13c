package sandbox

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// With network "allowlist" a runner's processes live in a network
// namespace of their own, as with "none", and the only way out is a
// listening socket that the spawner thread makes inside that namespace at
// 127.0.0.1. The socket belongs to the namespace it was made in, so the
// service accepts on it from any thread and dials out from its own
// namespace: the egress proxy (pkg/egress) serves it. HTTP_PROXY and its
// relatives point the processes there.

// listenEgress makes the proxy's listening socket on the calling thread,
// which must be in the runner's network namespace with loopback up.
func listenEgress() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return -1, fmt.Errorf("sandbox: egress proxy socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("sandbox: egress proxy socket: bind: %w", err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("sandbox: egress proxy socket: listen: %w", err)
	}
	return fd, nil
}

// egressListener wraps the socket fd (and takes it over) as a listener.
func egressListener(fd int) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), "egress-proxy")
	defer f.Close() // FileListener holds a duplicate
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("sandbox: egress proxy listener: %w", err)
	}
	return ln, nil
}

// proxyEnv is the environment that sends processes' HTTP and HTTPS
// traffic to the proxy at port: the upper and lower case names programs
// read (curl, wget, git, pip, npm, Go, apt, cargo), and NO_PROXY so that
// a server a process runs on loopback is reached directly.
func proxyEnv(port int) []string {
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	noProxy := "localhost,127.0.0.1,::1"
	return []string{
		"HTTP_PROXY=" + url, "HTTPS_PROXY=" + url, "http_proxy=" + url, "https_proxy=" + url,
		"NO_PROXY=" + noProxy, "no_proxy=" + noProxy,
	}
}
