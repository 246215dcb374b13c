package rpcserver

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/grpc"
)

// Transport is the HTTP/2 flow control and socket buffering of one end of a
// gRPC connection. A zero field leaves gRPC's default: a 64 KiB window that
// gRPC grows by estimating the link's bandwidth-delay product, and 32 KiB
// read and write buffers. Setting a window turns that estimate off: the
// window is then fixed.
type Transport struct {
	// StreamWindow is the initial HTTP/2 window of each stream, in bytes:
	// how much one stream may send before the receiver acknowledges it.
	StreamWindow int
	// ConnWindow is the initial HTTP/2 window of the whole connection.
	ConnWindow int
	// ReadBuffer is how many bytes gRPC reads from the socket at once.
	ReadBuffer int
	// WriteBuffer is how many bytes gRPC gathers before a write.
	WriteBuffer int
	// ReuseBuffers encodes and decodes messages with Codec, in pooled
	// buffers that are not cleared between uses.
	ReuseBuffers bool
}

// DefaultTransport is what toolwire's servers and clients use unless told
// otherwise: windows large enough that a stream of Bash output is not held
// up by acknowledgements (4 MiB per stream, 16 MiB per connection, which
// also caps what a connection's slow reader can make the other end hold),
// and buffers that take a 256 KiB Progress message in one system call.
var DefaultTransport = Transport{StreamWindow: 4 << 20, ConnWindow: 16 << 20, ReadBuffer: 256 << 10, WriteBuffer: 256 << 10, ReuseBuffers: true}

// minWindow is the smallest window HTTP/2 (and gRPC) accepts.
const minWindow = 64 << 10

// Validate reports a window gRPC would ignore or a negative buffer.
func (t Transport) Validate() error {
	for _, w := range []struct {
		name string
		v    int
	}{{"stream window", t.StreamWindow}, {"connection window", t.ConnWindow}} {
		if w.v != 0 && (w.v < minWindow || w.v > math.MaxInt32) {
			return fmt.Errorf("%s %d: want 0 (gRPC's default) or 64KiB up to 2GiB", w.name, w.v)
		}
	}
	if t.ReadBuffer < 0 || t.WriteBuffer < 0 {
		return fmt.Errorf("read and write buffers must not be negative (0: gRPC's default)")
	}
	return nil
}

// ServerOptions are t's settings for a grpc.Server.
func (t Transport) ServerOptions() []grpc.ServerOption {
	var o []grpc.ServerOption
	if t.StreamWindow > 0 {
		o = append(o, grpc.InitialWindowSize(int32(min(t.StreamWindow, math.MaxInt32))))
	}
	if t.ConnWindow > 0 {
		o = append(o, grpc.InitialConnWindowSize(int32(min(t.ConnWindow, math.MaxInt32))))
	}
	if t.ReadBuffer > 0 {
		o = append(o, grpc.ReadBufferSize(t.ReadBuffer))
	}
	if t.WriteBuffer > 0 {
		o = append(o, grpc.WriteBufferSize(t.WriteBuffer))
	}
	if t.ReuseBuffers {
		o = append(o, codecServerOption())
	}
	return o
}

// DialOptions are t's settings for a client connection.
func (t Transport) DialOptions() []grpc.DialOption {
	var o []grpc.DialOption
	if t.StreamWindow > 0 {
		o = append(o, grpc.WithInitialWindowSize(int32(min(t.StreamWindow, math.MaxInt32))))
	}
	if t.ConnWindow > 0 {
		o = append(o, grpc.WithInitialConnWindowSize(int32(min(t.ConnWindow, math.MaxInt32))))
	}
	if t.ReadBuffer > 0 {
		o = append(o, grpc.WithReadBufferSize(t.ReadBuffer))
	}
	if t.WriteBuffer > 0 {
		o = append(o, grpc.WithWriteBufferSize(t.WriteBuffer))
	}
	if t.ReuseBuffers {
		o = append(o, codecDialOption())
	}
	return o
}

// RegisterTransportFlags registers --PREFIXgrpc-stream-window,
// --PREFIXgrpc-conn-window, --PREFIXgrpc-read-buffer and
// --PREFIXgrpc-write-buffer on fs, with DefaultTransport's values, and
// returns the Transport they fill in. Sizes are bytes, or a number with
// KiB or MiB; 0 leaves gRPC's default.
func RegisterTransportFlags(fs *flag.FlagSet, prefix, peer string) *Transport {
	t := DefaultTransport
	fs.Var((*byteSize)(&t.StreamWindow), prefix+"grpc-stream-window", "HTTP/2 window of each stream "+peer+", e.g. 4MiB (0: gRPC's default, 64KiB grown by bandwidth estimation)")
	fs.Var((*byteSize)(&t.ConnWindow), prefix+"grpc-conn-window", "HTTP/2 window of each connection "+peer+", e.g. 16MiB (0: gRPC's default)")
	fs.Var((*byteSize)(&t.ReadBuffer), prefix+"grpc-read-buffer", "bytes gRPC reads from a socket "+peer+" at once (0: gRPC's default, 32KiB)")
	fs.Var((*byteSize)(&t.WriteBuffer), prefix+"grpc-write-buffer", "bytes gRPC gathers before writing to a socket "+peer+" (0: gRPC's default, 32KiB)")
	return &t
}

// byteSize is a flag.Value of a size in bytes: "262144", "256KiB", "4MiB".
type byteSize int

func (b *byteSize) String() string {
	if b == nil {
		return "0"
	}
	switch v := int(*b); {
	case v != 0 && v%(1<<20) == 0:
		return strconv.Itoa(v>>20) + "MiB"
	case v != 0 && v%(1<<10) == 0:
		return strconv.Itoa(v>>10) + "KiB"
	default:
		return strconv.Itoa(v)
	}
}

func (b *byteSize) Set(s string) error {
	num, unit := s, 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, unit = n, u.mult
			break
		}
	}
	v, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || v < 0 || v > math.MaxInt32/int64(unit) {
		return fmt.Errorf("want a size such as 262144, 256KiB or 4MiB, not %q", s)
	}
	*b = byteSize(int(v) * unit)
	return nil
}
