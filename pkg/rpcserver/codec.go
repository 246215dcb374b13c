package rpcserver

import (
	"fmt"
	"math/bits"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// Codec is gRPC's protobuf codec with buffers that are reused without being
// cleared. gRPC's own codec takes its buffers from mem.DefaultBufferPool,
// which clears a whole buffer on every Get and has no tier between 32 KiB
// and 1 MiB: each 256 KiB Progress message cleared 1 MiB when it was
// encoded, and again when the client gathered its frames to decode it.
// Neither needs clearing: encoding writes every byte of its buffer, and
// gathering copies over every byte. The wire format is the same, so either
// end may use it alone. A Transport with ReuseBuffers sets it on both.
var Codec encoding.CodecV2 = codec{}

// codec implements encoding.CodecV2 for proto messages.
type codec struct{}

// minPooled is the smallest message that gets a pooled buffer: below it,
// gRPC's own codec allocates too, and a pool costs more than it saves.
const minPooled = 1 << 10

func (codec) Name() string { return "proto" }

// messageOf returns v as a proto message, nil when it is none.
func messageOf(v any) proto.Message {
	switch m := v.(type) {
	case proto.Message:
		return m
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(m)
	}
	return nil
}

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	m := messageOf(v)
	if m == nil {
		return nil, fmt.Errorf("proto: cannot marshal %T, not a proto message", v)
	}
	size := proto.Size(m)
	// UseCachedSize reuses what Size just computed; the message must not
	// change in between, which gRPC's Send rules out.
	opts := proto.MarshalOptions{UseCachedSize: true}
	if size < minPooled {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := buffers.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		buffers.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, buffers)}, nil
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	m := messageOf(v)
	if m == nil {
		return fmt.Errorf("proto: cannot unmarshal into %T, not a proto message", v)
	}
	if len(data) == 1 {
		// One frame: decode it where it lies (proto.Unmarshal copies bytes
		// and strings out).
		return proto.Unmarshal(data[0].ReadOnlyData(), m)
	}
	buf := data.MaterializeToBuffer(buffers)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// buffers pools buffers in power-of-two sizes from minPooled up to
// MaxMessageBytes, one sync.Pool per size, and hands them out as they were
// left. A larger request is allocated and not kept.
var buffers = &bufferPool{}

// Pool sizes: 2^minShift up to 2^maxShift bytes.
var (
	minShift = bits.Len(minPooled - 1)
	maxShift = bits.Len(MaxMessageBytes - 1)
)

// bufferPool implements mem.BufferPool without clearing what it returns.
type bufferPool struct {
	pools [32]sync.Pool
}

// Get returns a buffer of length size and capacity the power of two at or
// above it.
func (p *bufferPool) Get(size int) *[]byte {
	shift := max(bits.Len(uint(size-1)), minShift)
	if size <= 0 || shift > maxShift {
		b := make([]byte, max(size, 0))
		return &b
	}
	if b, ok := p.pools[shift].Get().(*[]byte); ok {
		*b = (*b)[:size]
		return b
	}
	b := make([]byte, size, 1<<shift)
	return &b
}

// Put keeps buf for a later Get, in the pool of its capacity.
func (p *bufferPool) Put(buf *[]byte) {
	c := cap(*buf)
	shift := bits.Len(uint(c)) - 1
	if c != 1<<shift || shift < minShift || shift > maxShift {
		return // not one of ours
	}
	p.pools[shift].Put(buf)
}

// codecServerOption makes a server use Codec for every call.
func codecServerOption() grpc.ServerOption { return grpc.ForceServerCodecV2(Codec) }

// codecDialOption makes a client connection use Codec for every call.
func codecDialOption() grpc.DialOption {
	return grpc.WithDefaultCallOptions(grpc.ForceCodecV2(Codec))
}
