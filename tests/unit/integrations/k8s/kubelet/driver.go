// A kubelet stand-in for cotenant's device plugin conformance test, written for cotenant.
// It speaks only through the upstream kubelet API package
// (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1): it serves Registration on
// <dir>/kubelet.sock with the upstream server type, waits for the plugins to register, then
// dials each registered endpoint with the upstream DevicePlugin client and makes the calls
// a JSON script names. Requests are read and replies written as JSON through the generated
// types' own json tags, so the test sees exactly what the upstream client decoded.
//
// Usage: driver <script.json>; prints one JSON report on stdout.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type call struct {
	Resource string          `json:"resource"`
	RPC      string          `json:"rpc"`
	Request  json.RawMessage `json:"request"`
}

type script struct {
	Dir           string  `json:"dir"`
	Registrations int     `json:"registrations"`
	TimeoutS      float64 `json:"timeout_s"`
	Calls         []call  `json:"calls"`
}

type registration struct {
	Request   *api.RegisterRequest `json:"request"`
	Supported bool                 `json:"version_supported"`
}

type result struct {
	Resource string      `json:"resource"`
	RPC      string      `json:"rpc"`
	Code     string      `json:"code"`
	Message  string      `json:"message"`
	Response interface{} `json:"response"`
}

type report struct {
	SupportedVersions []string       `json:"supported_versions"`
	Registrations     []registration `json:"registrations"`
	Results           []result       `json:"results"`
}

// kubelet is the Registration service: it accepts a supported version, as the kubelet does.
type kubelet struct {
	api.UnimplementedRegistrationServer
	mu    sync.Mutex
	seen  []registration
	ready chan struct{}
	want  int
}

func (k *kubelet) Register(ctx context.Context, r *api.RegisterRequest) (*api.Empty, error) {
	supported := false
	for _, v := range api.SupportedVersions {
		supported = supported || v == r.Version
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seen = append(k.seen, registration{Request: r, Supported: supported})
	if len(k.seen) == k.want {
		close(k.ready)
	}
	if !supported {
		return nil, fmt.Errorf("version %q is not supported", r.Version)
	}
	return &api.Empty{}, nil
}

func dial(ctx context.Context, path string) (*grpc.ClientConn, error) {
	return grpc.DialContext(ctx, path, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
}

// invoke makes one call with the upstream client; the request is decoded into its type.
func invoke(ctx context.Context, client api.DevicePluginClient, c call) (interface{}, error) {
	decode := func(into interface{}) error {
		if len(c.Request) == 0 {
			return nil
		}
		return json.Unmarshal(c.Request, into)
	}
	switch c.RPC {
	case "GetDevicePluginOptions":
		return client.GetDevicePluginOptions(ctx, &api.Empty{})
	case "ListAndWatch": // the first response, as the kubelet reads it on connecting
		stream, err := client.ListAndWatch(ctx, &api.Empty{})
		if err != nil {
			return nil, err
		}
		return stream.Recv()
	case "GetPreferredAllocation":
		req := &api.PreferredAllocationRequest{}
		if err := decode(req); err != nil {
			return nil, err
		}
		return client.GetPreferredAllocation(ctx, req)
	case "Allocate":
		req := &api.AllocateRequest{}
		if err := decode(req); err != nil {
			return nil, err
		}
		return client.Allocate(ctx, req)
	case "PreStartContainer":
		req := &api.PreStartContainerRequest{}
		if err := decode(req); err != nil {
			return nil, err
		}
		return client.PreStartContainer(ctx, req)
	}
	return nil, fmt.Errorf("unknown rpc %q", c.RPC)
}

func run(s script) (*report, error) {
	timeout := time.Duration(s.TimeoutS * float64(time.Second))
	sock := filepath.Join(s.Dir, "kubelet.sock")
	listener, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	server := grpc.NewServer()
	k := &kubelet{ready: make(chan struct{}), want: s.Registrations}
	api.RegisterRegistrationServer(server, k)
	go func() { _ = server.Serve(listener) }()
	defer server.Stop()
	select {
	case <-k.ready:
	case <-time.After(timeout):
		return nil, fmt.Errorf("fewer than %d plugins registered in %v", s.Registrations, timeout)
	}
	k.mu.Lock() // a plugin may register again while the calls run: read a copy
	seen := append([]registration(nil), k.seen...)
	k.mu.Unlock()
	out := &report{SupportedVersions: api.SupportedVersions[:], Registrations: seen[:s.Registrations]}
	endpoints := map[string]string{}
	for _, r := range seen {
		endpoints[r.Request.ResourceName] = filepath.Join(s.Dir, r.Request.Endpoint)
	}
	for _, c := range s.Calls {
		endpoint, ok := endpoints[c.Resource]
		if !ok {
			return nil, fmt.Errorf("no plugin registered %q", c.Resource)
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		conn, err := dial(ctx, endpoint)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("dialing %s: %v", endpoint, err)
		}
		reply, err := invoke(ctx, api.NewDevicePluginClient(conn), c)
		st := status.Convert(err)
		out.Results = append(out.Results, result{Resource: c.Resource, RPC: c.RPC,
			Code: st.Code().String(), Message: st.Message(), Response: reply})
		cancel()
		conn.Close()
	}
	return out, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: driver <script.json>")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	var s script
	if err == nil {
		err = json.Unmarshal(raw, &s)
	}
	var out *report
	if err == nil {
		out, err = run(s)
	}
	if err == nil {
		err = json.NewEncoder(os.Stdout).Encode(out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
}
