package rpcserver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolwire/toolwire/pkg/rpcserver"
)

// countingCodec counts the messages a codec encodes and decodes.
type countingCodec struct {
	encoding.CodecV2
	marshals, unmarshals *atomic.Int64
}

func (c countingCodec) Marshal(v any) (mem.BufferSlice, error) {
	c.marshals.Add(1)
	return c.CodecV2.Marshal(v)
}

func (c countingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	c.unmarshals.Add(1)
	return c.CodecV2.Unmarshal(data, v)
}

// TestCodecCarriesMessagesOfEverySize echoes messages of sizes around the
// pool's edges, largest and smallest mixed so that reused buffers hold
// other bytes, through a server and a client built with DefaultTransport:
// each comes back whole, and both ends encoded and decoded every message
// with Codec.
func TestCodecCarriesMessagesOfEverySize(t *testing.T) {
	var marshals, unmarshals atomic.Int64
	saved := rpcserver.Codec
	rpcserver.Codec = countingCodec{CodecV2: saved, marshals: &marshals, unmarshals: &unmarshals}
	t.Cleanup(func() { rpcserver.Codec = saved })

	srv := rpcserver.New(nil, grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		for {
			m := new(wrapperspb.BytesValue)
			if err := stream.RecvMsg(m); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if err := stream.SendMsg(m); err != nil {
				return err
			}
		}
	}))
	conn := dialServed(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Echo/Echo")
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{4<<20 - 64, 0, 1, 256<<10 + 40, 1000, 1 << 20, 1023, 16<<10 + 1, 1024, 1025, 3 << 20, 100 << 10}
	for i, size := range sizes {
		body := make([]byte, size)
		for j := range body {
			body[j] = byte(i + 7*j)
		}
		if err := stream.SendMsg(wrapperspb.Bytes(body)); err != nil {
			t.Fatalf("send %d bytes: %v", size, err)
		}
		got := new(wrapperspb.BytesValue)
		if err := stream.RecvMsg(got); err != nil {
			t.Fatalf("receive %d bytes: %v", size, err)
		}
		if !bytes.Equal(got.GetValue(), body) {
			t.Fatalf("%d bytes came back as %d other bytes", size, len(got.GetValue()))
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := stream.RecvMsg(new(wrapperspb.BytesValue)); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v", err)
	}
	// Client and server each encode and decode every message once.
	n := int64(2 * len(sizes))
	if marshals.Load() != n || unmarshals.Load() != n {
		t.Errorf("Codec encoded %d and decoded %d messages, want %d each: an end does not use it",
			marshals.Load(), unmarshals.Load(), n)
	}
}

// BenchmarkCodec encodes a 256 KiB message and decodes it from the 16 KiB
// frames it arrives in, with gRPC's own protobuf codec and with Codec.
func BenchmarkCodec(b *testing.B) {
	msg := wrapperspb.Bytes(bytes.Repeat([]byte("x"), 256<<10))
	for _, c := range []struct {
		name  string
		codec encoding.CodecV2
	}{{"grpc", encoding.GetCodecV2("proto")}, {"toolwire", rpcserver.Codec}} {
		b.Run(c.name+"/marshal", func(b *testing.B) {
			b.SetBytes(256 << 10)
			for b.Loop() {
				data, err := c.codec.Marshal(msg)
				if err != nil {
					b.Fatal(err)
				}
				data.Free()
			}
		})
		b.Run(c.name+"/unmarshal", func(b *testing.B) {
			data, err := c.codec.Marshal(msg)
			if err != nil {
				b.Fatal(err)
			}
			wire := data.Materialize()
			data.Free()
			var frames mem.BufferSlice
			for len(wire) > 0 {
				n := min(len(wire), 16<<10)
				frames = append(frames, mem.SliceBuffer(wire[:n]))
				wire = wire[n:]
			}
			b.SetBytes(256 << 10)
			for b.Loop() {
				if err := c.codec.Unmarshal(frames, new(wrapperspb.BytesValue)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
