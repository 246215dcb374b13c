// Package kubernetes holds toolwire's Kubernetes manifests. Its test decodes
// every manifest strictly into the Kubernetes API types (an unknown or
// misspelled field, a wrong type, a duplicate key or an unknown kind fails)
// and checks what the deployment relies on: selectors that match, ports
// that exist, probes that run each server's health subcommand over its own
// transport, the executor's disruption budget, images pinned to a release,
// the executor's exact capabilities, the network policy, and TLS files that
// come from read-only Secrets.
//
// It lives in a module of its own so that the main module does not depend
// on the Kubernetes API packages.
package kubernetes_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// What the manifests must agree on.
const (
	namespace         = "toolwire"
	toolsvcName       = "toolsvc"
	orchestratorName  = "orchestrator"
	toolsvcImage      = "toolwire/toolsvc:0.1.0"
	orchestratorImage = "toolwire/orchestrator:0.1.0"
	clusterDomain     = "svc.cluster.local"
	kustomizationFile = "kustomization.yaml"
	deploymentDoc     = "../../docs/deployment.md"
)

// toolsvcCapabilities is exactly what the sandbox needs in a container
// (docs/security.md): network namespace and cgroup2 mount, loopback, the
// switch to the tool user, handing it files, working in its workspace, and
// killing process groups.
var toolsvcCapabilities = []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "KILL", "NET_ADMIN", "SETGID", "SETUID", "SYS_ADMIN"}

// images describes each image the manifests run: its Dockerfile (for the
// entry point the container's args follow), the flag defaults the checks
// need, and how long the server may still take after its --grace.
var images = map[string]imageInfo{
	toolsvcImage: {
		dockerfile:   "../docker/toolsvc.Dockerfile",
		binary:       "/usr/local/bin/toolsvc",
		defaultGrace: 30 * time.Second,
		// After the drain toolsvc closes the server within 5s.
		afterGrace: 5 * time.Second,
	},
	orchestratorImage: {
		dockerfile:   "../docker/orchestrator.Dockerfile",
		binary:       "/usr/local/bin/orchestrator",
		defaultGrace: 10 * time.Second,
	},
}

type imageInfo struct {
	dockerfile   string
	binary       string // the server binary, whose health subcommand the probes run
	defaultGrace time.Duration
	afterGrace   time.Duration
}

// allowedKinds are the kinds this directory holds and the test checks.
// Another kind needs its own checks before it is added here.
var allowedKinds = map[string]bool{"Namespace": true, "Deployment": true, "Service": true, "NetworkPolicy": true, "PodDisruptionBudget": true}

// secretFlags are the flags whose value is a key or certificate file.
var secretFlags = []string{"tls-cert", "tls-key", "tls-client-ca", "tls-ca", "token-file",
	"executor-tls-ca", "executor-tls-cert", "executor-tls-key", "executor-token-file"}

// decoder decodes YAML or JSON into the registered API types, strictly:
// unknown fields (matched case-sensitively) and duplicate keys are errors.
var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(appsv1.AddToScheme(s))
	utilruntime.Must(networkingv1.AddToScheme(s))
	utilruntime.Must(policyv1.AddToScheme(s))
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}()

// decodeAll decodes every YAML document of data.
func decodeAll(data []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []runtime.Object
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if j, err := yaml.YAMLToJSON(doc); err == nil && string(bytes.TrimSpace(j)) == "null" {
			continue // only comments
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if !allowedKinds[gvk.Kind] {
			return nil, fmt.Errorf("document %d: kind %s is not one this test checks", i, gvk.Kind)
		}
		out = append(out, obj)
	}
}

// kustomization is the part of a Kustomization this directory uses;
// decoding it strictly refuses any other field.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

func readKustomization(t *testing.T) kustomization {
	t.Helper()
	data, err := os.ReadFile(kustomizationFile)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		t.Fatalf("%s: %v", kustomizationFile, err)
	}
	var k kustomization
	strict, err := kjson.UnmarshalStrict(j, &k)
	if err := errors.Join(append(strict, err)...); err != nil {
		t.Fatalf("%s: %v", kustomizationFile, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("%s: apiVersion %q kind %q, want kustomize.config.k8s.io/v1beta1 Kustomization", kustomizationFile, k.APIVersion, k.Kind)
	}
	return k
}

// manifests are the decoded objects of every file the kustomization lists.
type manifests struct {
	namespaces  []*corev1.Namespace
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	policies    []*networkingv1.NetworkPolicy
	budgets     []*policyv1.PodDisruptionBudget
	all         []metav1.Object
}

func load(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{}}
	for _, file := range readKustomization(t).Resources {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeAll(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(objs) == 0 {
			t.Fatalf("%s: no object", file)
		}
		for _, obj := range objs {
			switch o := obj.(type) {
			case *corev1.Namespace:
				m.namespaces = append(m.namespaces, o)
			case *appsv1.Deployment:
				if m.deployments[o.Name] != nil {
					t.Fatalf("%s: second Deployment %s", file, o.Name)
				}
				m.deployments[o.Name] = o
			case *corev1.Service:
				if m.services[o.Name] != nil {
					t.Fatalf("%s: second Service %s", file, o.Name)
				}
				m.services[o.Name] = o
			case *networkingv1.NetworkPolicy:
				m.policies = append(m.policies, o)
			case *policyv1.PodDisruptionBudget:
				m.budgets = append(m.budgets, o)
			}
			m.all = append(m.all, obj.(metav1.Object))
		}
	}
	return m
}

func (m *manifests) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	d := m.deployments[name]
	if d == nil {
		t.Fatalf("no Deployment %s", name)
	}
	return d
}

func (m *manifests) service(t *testing.T, name string) *corev1.Service {
	t.Helper()
	s := m.services[name]
	if s == nil {
		t.Fatalf("no Service %s", name)
	}
	return s
}

// container returns the container of d with d's name.
func container(t *testing.T, d *appsv1.Deployment) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == d.Name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, d.Name)
	return nil
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	k := readKustomization(t)
	var files []string
	for _, pattern := range []string{"*.yaml", "*.yml"} {
		found, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, found...)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return f == kustomizationFile })
	slices.Sort(files)
	listed := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(files, listed) {
		t.Errorf("%s lists %v; the directory has %v", kustomizationFile, listed, files)
	}
	if len(slices.Compact(slices.Clone(listed))) != len(listed) {
		t.Errorf("%s lists a file twice: %v", kustomizationFile, listed)
	}
}

// TestStrictDecodingRejects breaks the real executor manifest in the ways
// the strict decoding is there to catch, and expects each to fail.
func TestStrictDecodingRejects(t *testing.T) {
	orig, err := os.ReadFile("toolsvc-deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeAll(orig); err != nil {
		t.Fatalf("toolsvc-deployment.yaml as it is fails to decode: %v", err)
	}
	cases := map[string]struct{ old, new, want string }{
		"misspelled field":         {"  replicas: 3\n", "  replica: 3\n", `unknown field "spec.replica"`},
		"field in the wrong case":  {"  replicas: 3\n", "  Replicas: 3\n", `unknown field "spec.Replicas"`},
		"field at the wrong level": {"  replicas: 3\n", "  replicas: 3\n  terminationGracePeriodSeconds: 45\n", `unknown field "spec.terminationGracePeriodSeconds"`},
		"misspelled probe field":   {"            periodSeconds: 5\n", "            periodSecond: 5\n", `unknown field "spec.template.spec.containers[0].readinessProbe.periodSecond"`},
		"wrong type":               {"  replicas: 3\n", "  replicas: three\n", "cannot unmarshal string"},
		"string for a list":        {"              drop:\n                - ALL\n", "              drop: ALL\n", "cannot unmarshal string"},
		"duplicate key":            {"  replicas: 3\n", "  replicas: 3\n  replicas: 4\n", `"replicas" already set`},
		"unknown kind":             {"kind: Deployment\n", "kind: Deploymnet\n", `no kind "Deploymnet" is registered`},
		"unserved API version":     {"apiVersion: apps/v1\n", "apiVersion: extensions/v1beta1\n", `for version "extensions/v1beta1"`},
		"kind without checks":      {string(orig), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n", "kind ConfigMap is not one this test checks"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if !bytes.Contains(orig, []byte(c.old)) {
				t.Fatalf("toolsvc-deployment.yaml no longer contains %q; update the case", c.old)
			}
			broken := bytes.Replace(orig, []byte(c.old), []byte(c.new), 1)
			_, err := decodeAll(broken)
			switch {
			case err == nil:
				t.Errorf("replacing %q by %q decodes without error", c.old, c.new)
			case !strings.Contains(err.Error(), c.want):
				t.Errorf("refused, but not for the expected reason %q: %v", c.want, err)
			}
		})
	}
}

func TestNamespaceIsConsistent(t *testing.T) {
	m := load(t)
	if len(m.namespaces) != 1 || m.namespaces[0].Name != namespace {
		t.Fatalf("want exactly one Namespace %q, have %d", namespace, len(m.namespaces))
	}
	for _, o := range m.all {
		if _, ok := o.(*corev1.Namespace); ok {
			continue
		}
		if o.GetNamespace() != namespace {
			t.Errorf("%s %q is in namespace %q, want %q", kindOf(o), o.GetName(), o.GetNamespace(), namespace)
		}
	}
}

func kindOf(o metav1.Object) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", o), "*")
}

func TestDeployments(t *testing.T) {
	m := load(t)
	if got := m.deployment(t, toolsvcName).Spec.Replicas; got == nil || *got != 3 {
		t.Errorf("toolsvc replicas = %v, want 3", got)
	}
	wantImage := map[string]string{toolsvcName: toolsvcImage, orchestratorName: orchestratorImage}
	for name := range wantImage {
		m.deployment(t, name)
	}
	for name, d := range m.deployments {
		t.Run(name, func(t *testing.T) {
			sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
			if err != nil {
				t.Fatalf("selector: %v", err)
			}
			if sel.Empty() {
				t.Error("empty selector")
			}
			if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("selector %s does not match the pod labels %v", sel, d.Spec.Template.Labels)
			}
			want, ok := wantImage[name]
			if !ok {
				t.Fatalf("unexpected Deployment %s", name)
			}
			pod := d.Spec.Template.Spec
			for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
				if _, known := images[c.Image]; !known {
					t.Errorf("container %s runs image %q, not one of toolwire's", c.Name, c.Image)
				}
			}
			c := container(t, d)
			if c.Image != want {
				t.Errorf("image %q, want %q", c.Image, want)
			}
			checkProbe(t, m, d, c, c.ReadinessProbe, false)
			checkProbe(t, m, d, c, c.LivenessProbe, true)
			checkGrace(t, d, c)
			checkVolumeMounts(t, &pod)
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Error("automountServiceAccountToken must be false: nothing here talks to the Kubernetes API")
			}
		})
	}
}

// checkProbe requires an exec probe that runs the container's own server
// binary's health subcommand against the port the server listens on, over
// the server's transport: the kubelet's grpc: probes speak plaintext only,
// and a TCP check cannot see a draining server. Readiness must ask for the
// service to be SERVING (so it fails while the server drains); liveness must
// pass on any answer (--live), so a draining server is not restarted.
func checkProbe(t *testing.T, m *manifests, d *appsv1.Deployment, c *corev1.Container, p *corev1.Probe, live bool) {
	t.Helper()
	what := "readiness"
	if live {
		what = "liveness"
	}
	if p == nil {
		t.Errorf("container %s has no %s probe", c.Name, what)
		return
	}
	h := p.ProbeHandler
	if h.Exec == nil || h.HTTPGet != nil || h.TCPSocket != nil || h.GRPC != nil {
		t.Errorf("%s probe of %s must be an exec probe, and only that", what, c.Name)
		return
	}
	cmd := h.Exec.Command
	info := images[c.Image]
	if len(cmd) < 2 || cmd[0] != info.binary || cmd[1] != "health" {
		t.Errorf("%s probe of %s runs %q, want %s health ...", what, c.Name, cmd, info.binary)
		return
	}
	if !dockerfileInstalls(t, info.dockerfile, info.binary) {
		t.Errorf("%s does not copy %s into the image", info.dockerfile, info.binary)
	}
	args := cmd[2:]
	if _, isLive := flagValue(args, "live"); isLive != live {
		t.Errorf("%s probe of %s: --live is %v, want %v (readiness must see NOT_SERVING, liveness must not)", what, c.Name, isLive, live)
	}
	if svc, ok := flagValue(args, "service"); ok && !live {
		t.Errorf("%s probe of %s asks about --service=%q; the default (the server's own service) is what drains", what, c.Name, svc)
	}
	addr, ok := flagValue(args, "addr")
	host, port, found := strings.Cut(addr, ":")
	if !ok || !found || (host != "127.0.0.1" && host != "localhost") {
		t.Errorf("%s probe of %s: --addr=%q, want the pod's own loopback", what, c.Name, addr)
	} else if lp := listenPort(t, effectiveArgs(t, c)); port != strconv.Itoa(int(lp)) {
		t.Errorf("%s probe of %s checks port %s; the server listens on %d", what, c.Name, port, lp)
	}
	// The probe speaks the server's transport.
	server := effectiveArgs(t, c)
	_, serverTLS := flagValue(server, "tls-cert")
	_, probeTLS := flagValue(args, "tls-ca")
	_, probeInsecure := flagValue(args, "insecure")
	switch {
	case serverTLS && !probeTLS:
		t.Errorf("%s probe of %s has no --tls-ca, but the server serves TLS", what, c.Name)
	case !serverTLS && !probeInsecure:
		t.Errorf("%s probe of %s has no --insecure, but the server serves plaintext", what, c.Name)
	}
	// The certificate names the Service; the probe dials an IP address.
	if serverTLS {
		s := serviceOf(t, m, d)
		want := s.Name + "." + s.Namespace + "." + clusterDomain
		if got, _ := flagValue(args, "tls-server-name"); got != want {
			t.Errorf("%s probe of %s: --tls-server-name=%q, want the Service's name %q", what, c.Name, got, want)
		}
	}
	timeout := 3 * time.Second // the subcommand's default
	if v, ok := flagValue(args, "timeout"); ok {
		var err error
		if timeout, err = time.ParseDuration(v); err != nil {
			t.Fatalf("%s probe of %s: --timeout=%q: %v", what, c.Name, v, err)
		}
	}
	if limit := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second; timeout >= limit {
		t.Errorf("%s probe of %s: --timeout %v is not below timeoutSeconds %v: the kubelet would kill the probe before it says why", what, c.Name, timeout, limit)
	}
}

// serviceOf returns the one Service that selects d's pods.
func serviceOf(t *testing.T, m *manifests, d *appsv1.Deployment) *corev1.Service {
	t.Helper()
	var found []*corev1.Service
	for _, s := range m.services {
		if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d Services select the pods of %s, want 1", len(found), d.Name)
	}
	return found[0]
}

// dockerfileInstalls reports whether a COPY of the Dockerfile puts binary
// into the image, as "COPY name... dir/" or "COPY name binary".
func dockerfileInstalls(t *testing.T, file, binary string) bool {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir, name := path.Split(binary)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "COPY" {
			continue
		}
		srcs, dst := f[1:len(f)-1], f[len(f)-1]
		srcs = slices.DeleteFunc(slices.Clone(srcs), func(s string) bool { return strings.HasPrefix(s, "--") })
		for _, src := range srcs {
			if path.Base(src) == name && (dst == dir || dst == binary) || dst == binary {
				return true
			}
		}
	}
	return false
}

// containerPort finds the declared port p names (by name or number).
func containerPort(c *corev1.Container, p intstr.IntOrString) (corev1.ContainerPort, error) {
	for _, cp := range c.Ports {
		if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
			return cp, nil
		}
	}
	return corev1.ContainerPort{}, fmt.Errorf("port %s is not declared by container %s", p.String(), c.Name)
}

// checkGrace requires the kubelet to wait longer than the server's own
// shutdown: --grace plus what it takes after it.
func checkGrace(t *testing.T, d *appsv1.Deployment, c *corev1.Container) {
	t.Helper()
	info := images[c.Image]
	grace := info.defaultGrace
	if v, ok := flagValue(effectiveArgs(t, c), "grace"); ok {
		var err error
		if grace, err = time.ParseDuration(v); err != nil {
			t.Fatalf("--grace=%q: %v", v, err)
		}
	}
	tgps := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if tgps == nil {
		t.Errorf("terminationGracePeriodSeconds is not set; it must exceed %v", grace+info.afterGrace)
		return
	}
	if got := time.Duration(*tgps) * time.Second; got <= grace+info.afterGrace {
		t.Errorf("terminationGracePeriodSeconds %v does not exceed the server's shutdown (--grace %v + %v)", got, grace, info.afterGrace)
	}
}

func checkVolumeMounts(t *testing.T, pod *corev1.PodSpec) {
	t.Helper()
	vols := map[string]bool{}
	for _, v := range pod.Volumes {
		vols[v.Name] = true
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		for _, vm := range c.VolumeMounts {
			if !vols[vm.Name] {
				t.Errorf("container %s mounts undeclared volume %s", c.Name, vm.Name)
			}
		}
	}
}

func TestServices(t *testing.T) {
	m := load(t)
	headless := m.service(t, toolsvcName)
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service toolsvc clusterIP = %q, want None (headless: DNS names every pod)", headless.Spec.ClusterIP)
	}
	if p := servicePort(t, headless, "grpc"); p.Port != 7070 {
		t.Errorf("Service toolsvc port grpc = %d, want 7070", p.Port)
	}
	orch := m.service(t, orchestratorName)
	if orch.Spec.ClusterIP == corev1.ClusterIPNone || orch.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("Service orchestrator must be a ClusterIP Service with a virtual IP (type %q, clusterIP %q)", orch.Spec.Type, orch.Spec.ClusterIP)
	}
	if p := servicePort(t, orch, "grpc"); p.Port != 7071 {
		t.Errorf("Service orchestrator port grpc = %d, want 7071", p.Port)
	}
	for name, s := range m.services {
		t.Run(name, func(t *testing.T) {
			d := selectedDeployment(t, m, s)
			c := container(t, d)
			for _, p := range s.Spec.Ports {
				if p.TargetPort.Type != intstr.String {
					t.Errorf("port %s: targetPort %s should name a container port", p.Name, p.TargetPort.String())
					continue
				}
				cp, err := containerPort(c, p.TargetPort)
				if err != nil {
					t.Errorf("port %s: %v", p.Name, err)
					continue
				}
				if proto(cp.Protocol) != proto(p.Protocol) {
					t.Errorf("port %s is %s, container port %s is %s", p.Name, proto(p.Protocol), cp.Name, proto(cp.Protocol))
				}
				// Clients of a headless Service dial the pods directly,
				// at the Service's port number.
				if s.Spec.ClusterIP == corev1.ClusterIPNone && p.Port != cp.ContainerPort {
					t.Errorf("headless port %s is %d, the container listens on %d", p.Name, p.Port, cp.ContainerPort)
				}
				if lp := listenPort(t, effectiveArgs(t, c)); lp != cp.ContainerPort {
					t.Errorf("container %s declares port %d but listens on %d", c.Name, cp.ContainerPort, lp)
				}
			}
		})
	}
}

func proto(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

func servicePort(t *testing.T, s *corev1.Service, name string) corev1.ServicePort {
	t.Helper()
	for _, p := range s.Spec.Ports {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("Service %s has no port %q", s.Name, name)
	return corev1.ServicePort{}
}

// selectedDeployment returns the one Deployment whose pods s selects.
func selectedDeployment(t *testing.T, m *manifests, s *corev1.Service) *appsv1.Deployment {
	t.Helper()
	if len(s.Spec.Selector) == 0 {
		t.Fatalf("Service %s has no selector", s.Name)
	}
	sel := labels.SelectorFromSet(s.Spec.Selector)
	var found []*appsv1.Deployment
	for _, d := range m.deployments {
		if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("Service %s selects the pods of %d Deployments, want 1", s.Name, len(found))
	}
	return found[0]
}

func TestToolsvcSecurityContext(t *testing.T) {
	m := load(t)
	d := m.deployment(t, toolsvcName)
	c := container(t, d)
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("toolsvc has no securityContext with capabilities")
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("capabilities.drop = %v, want [ALL]", sc.Capabilities.Drop)
	}
	if add := slices.Sorted(slices.Values(sc.Capabilities.Add)); !slices.Equal(add, toolsvcCapabilities) {
		t.Errorf("capabilities.add = %v, want exactly %v", add, toolsvcCapabilities)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("toolsvc must not be privileged")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false (no_new_privs for the container, as with Docker's no-new-privileges)")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem must be true")
	}
	checkSeccomp(t, d, c)
	pod := d.Spec.Template.Spec
	mounts := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		mounts[v.Name] = v
	}
	for _, dir := range []string{"/workspace", "/tmp"} {
		vm, ok := mountAt(c, dir)
		if !ok || mounts[vm.Name].EmptyDir == nil || mounts[vm.Name].EmptyDir.SizeLimit == nil {
			t.Errorf("%s must be an emptyDir with a sizeLimit (the root filesystem is read-only)", dir)
		}
	}
	// The init container hands /workspace to the image's tool user.
	uid := dockerfileArg(t, images[toolsvcImage].dockerfile, "TOOL_UID")
	if len(pod.InitContainers) != 1 {
		t.Fatalf("want one init container, have %d", len(pod.InitContainers))
	}
	ic := pod.InitContainers[0]
	if ic.Image != toolsvcImage {
		t.Errorf("init container image %q, want %q", ic.Image, toolsvcImage)
	}
	if cmd := strings.Join(ic.Command, " "); !strings.Contains(cmd, "chown "+uid+":"+uid+" /workspace") {
		t.Errorf("init container %q does not chown /workspace to the tool uid %s", cmd, uid)
	}
	if isc := ic.SecurityContext; isc == nil || isc.Capabilities == nil ||
		!slices.Equal(isc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		!slices.Equal(isc.Capabilities.Add, []corev1.Capability{"CHOWN"}) ||
		isc.AllowPrivilegeEscalation == nil || *isc.AllowPrivilegeEscalation {
		t.Error("init container must drop ALL, add only CHOWN and disallow privilege escalation")
	}
}

func TestOrchestratorSecurityContext(t *testing.T) {
	m := load(t)
	d := m.deployment(t, orchestratorName)
	c := container(t, d)
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("orchestrator has no securityContext with capabilities")
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities = %+v, want drop [ALL] and nothing added", *sc.Capabilities)
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("runAsNonRoot must be true")
	}
	uid, _ := strconv.ParseInt(dockerfileArg(t, images[orchestratorImage].dockerfile, "ORCHESTRATOR_UID"), 10, 64)
	if sc.RunAsUser == nil || *sc.RunAsUser != uid {
		t.Errorf("runAsUser = %v, want the image's user %d", sc.RunAsUser, uid)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem must be true")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("orchestrator must not be privileged")
	}
	checkSeccomp(t, d, c)
	// Conversations in PostgreSQL need no directory; transcript files do.
	if !hasSecretEnv(c, "TOOLWIRE_STORE") {
		dir, ok := flagValue(effectiveArgs(t, c), "sessions-dir")
		if !ok {
			t.Fatal("no --sessions-dir: the default is under $HOME, on the read-only root")
		}
		if _, ok := mountAt(c, dir); !ok {
			t.Errorf("--sessions-dir %s is not a mounted volume", dir)
		}
	}
	if !hasSecretEnv(c, "ANTHROPIC_API_KEY") {
		t.Error("ANTHROPIC_API_KEY must come from a Secret")
	}
}

func checkSeccomp(t *testing.T, d *appsv1.Deployment, c *corev1.Container) {
	t.Helper()
	p := d.Spec.Template.Spec.SecurityContext
	var prof *corev1.SeccompProfile
	if p != nil {
		prof = p.SeccompProfile
	}
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		prof = c.SecurityContext.SeccompProfile
	}
	if prof == nil || prof.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: seccomp profile %v, want RuntimeDefault", d.Name, prof)
	}
}

func mountAt(c *corev1.Container, dir string) (corev1.VolumeMount, bool) {
	for _, vm := range c.VolumeMounts {
		if path.Clean(vm.MountPath) == path.Clean(dir) {
			return vm, true
		}
	}
	return corev1.VolumeMount{}, false
}

func hasSecretEnv(c *corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value == "" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
		}
	}
	return false
}

func TestNetworkPolicy(t *testing.T) {
	m := load(t)
	toolsvc := m.deployment(t, toolsvcName)
	orch := m.deployment(t, orchestratorName)
	var np *networkingv1.NetworkPolicy
	for _, p := range m.policies {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			t.Fatalf("NetworkPolicy %s: %v", p.Name, err)
		}
		if !sel.Empty() && sel.Matches(labels.Set(toolsvc.Spec.Template.Labels)) {
			if sel.Matches(labels.Set(orch.Spec.Template.Labels)) {
				t.Errorf("NetworkPolicy %s selects the orchestrator's pods too", p.Name)
			}
			np = p
		}
	}
	if np == nil {
		t.Fatal("no NetworkPolicy selects the toolsvc pods")
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("policyTypes %v must hold Ingress and Egress", np.Spec.PolicyTypes)
	}
	c := container(t, toolsvc)
	grpcPort, err := containerPort(c, intstr.FromString("grpc"))
	if err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Ingress) == 0 {
		t.Error("no ingress rule: the orchestrator could not reach toolsvc")
	}
	for i, r := range np.Spec.Ingress {
		if len(r.From) == 0 {
			t.Errorf("ingress rule %d admits every source", i)
		}
		for _, peer := range r.From {
			if peer.IPBlock != nil || peer.NamespaceSelector != nil || peer.PodSelector == nil {
				t.Errorf("ingress rule %d: peer %+v is not a pod selector in this namespace", i, peer)
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
			if err != nil {
				t.Fatal(err)
			}
			for name, d := range m.deployments {
				if matches := !sel.Empty() && sel.Matches(labels.Set(d.Spec.Template.Labels)); matches != (name == orchestratorName) {
					t.Errorf("ingress rule %d: selecting the pods of %s is %v", i, name, matches)
				}
			}
		}
		if len(r.Ports) == 0 {
			t.Errorf("ingress rule %d admits every port", i)
		}
		for _, p := range r.Ports {
			if p.Port == nil || p.EndPort != nil || proto(ptrOr(p.Protocol)) != corev1.ProtocolTCP {
				t.Errorf("ingress rule %d: port %+v is not exactly TCP %d", i, p, grpcPort.ContainerPort)
				continue
			}
			if cp, err := containerPort(c, *p.Port); err != nil || cp.ContainerPort != grpcPort.ContainerPort {
				t.Errorf("ingress rule %d: port %s is not toolsvc's gRPC port %d", i, p.Port.String(), grpcPort.ContainerPort)
			}
		}
	}
	for i, r := range np.Spec.Egress {
		if len(r.Ports) == 0 {
			t.Errorf("egress rule %d admits every port; only DNS is allowed", i)
		}
		for _, p := range r.Ports {
			if p.Port == nil || p.Port.Type != intstr.Int || p.Port.IntVal != 53 || p.EndPort != nil {
				t.Errorf("egress rule %d: port %+v is not DNS (53)", i, p)
			}
		}
	}
}

// TestPodDisruptionBudget checks that voluntary disruptions (node drains)
// take toolsvc pods one at a time at most, that the budget selects exactly
// the executors, and that it can be met: a budget that allows no eviction
// blocks every node drain.
// TestPodDisruptionBudget checks that each Deployment, toolsvc and the
// orchestrator's replicas, has exactly one budget, selecting its pods and
// no other's, that allows one eviction at a time and never blocks a drain
// on a pod that is not ready.
func TestPodDisruptionBudget(t *testing.T) {
	m := load(t)
	budgets := map[string]*policyv1.PodDisruptionBudget{}
	for _, b := range m.budgets {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil {
			t.Fatalf("PodDisruptionBudget %s: %v", b.Name, err)
		}
		var selected []string
		for name, d := range m.deployments {
			if !sel.Empty() && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				selected = append(selected, name)
			}
		}
		if len(selected) != 1 {
			t.Errorf("PodDisruptionBudget %s selects the pods of %v, want one Deployment's", b.Name, selected)
			continue
		}
		if prev := budgets[selected[0]]; prev != nil {
			t.Errorf("two PodDisruptionBudgets for %s: %s and %s", selected[0], prev.Name, b.Name)
		}
		budgets[selected[0]] = b
	}
	for _, name := range []string{toolsvcName, orchestratorName} {
		t.Run(name, func(t *testing.T) {
			pdb := budgets[name]
			if pdb == nil {
				t.Fatalf("no PodDisruptionBudget for %s", name)
			}
			replicas := int(ptrOrZero(m.deployment(t, name).Spec.Replicas))
			switch {
			case pdb.Spec.MinAvailable != nil:
				t.Errorf("minAvailable %s: use maxUnavailable, which keeps allowing an eviction whatever the replica count", pdb.Spec.MinAvailable.String())
			case pdb.Spec.MaxUnavailable == nil:
				t.Error("the budget sets neither maxUnavailable nor minAvailable")
			default:
				n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, replicas, true)
				if err != nil {
					t.Fatal(err)
				}
				if n < 1 || n >= replicas {
					t.Errorf("maxUnavailable %s of %d replicas allows %d evictions at once; want at least 1 and fewer than all", pdb.Spec.MaxUnavailable.String(), replicas, n)
				}
			}
			// A pod that never became ready must not hold up a node drain.
			if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
				t.Errorf("unhealthyPodEvictionPolicy %v, want AlwaysAllow", p)
			}
		})
	}
}

// TestOrchestratorReplicas checks that the orchestrator runs as several
// replicas on a shared PostgreSQL whose URL comes from a Secret (never a
// flag, which anyone who may list pods reads), each named after its pod,
// with no transcript directory of its own.
func TestOrchestratorReplicas(t *testing.T) {
	m := load(t)
	d := m.deployment(t, orchestratorName)
	if n := ptrOrZero(d.Spec.Replicas); n < 2 {
		t.Errorf("orchestrator replicas = %d, want at least 2", n)
	}
	c := container(t, d)
	args := effectiveArgs(t, c)
	if v, ok := flagValue(args, "store"); ok {
		t.Errorf("--store=%s on the command line; the URL holds a password and must come from a Secret", v)
	}
	if v, ok := flagValue(args, "sessions-dir"); ok {
		t.Errorf("--sessions-dir=%s: replicas keep conversations in PostgreSQL", v)
	}
	if v, _ := flagValue(args, "replica"); v != "$(POD_NAME)" {
		t.Errorf("--replica=%q, want $(POD_NAME)", v)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["TOOLWIRE_STORE"]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.Value != "" {
		t.Errorf("TOOLWIRE_STORE = %+v, want it from a Secret", e)
	}
	if e := env["POD_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME = %+v, want the pod's name from the downward API", e)
	}
}

func ptrOrZero[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// TestImagesPinned checks that every image is named with a release tag or
// a digest, never "latest" or no tag (which means latest), and that the
// Dockerfiles' default base image is pinned as well.
func TestImagesPinned(t *testing.T) {
	pinned := regexp.MustCompile(`^[a-z0-9][a-z0-9._/-]*(:[0-9]+\.[0-9]+(\.[0-9]+)?(-[a-z0-9.]+)?|@sha256:[0-9a-f]{64})$`)
	for ref, info := range images {
		if !pinned.MatchString(ref) {
			t.Errorf("image %q is not pinned to a release tag (name:1.2.3) or digest", ref)
		}
		base := dockerfileArg(t, info.dockerfile, "BASE")
		if !pinned.MatchString(base) {
			t.Errorf("%s: default BASE %q is not pinned to a release tag or digest", info.dockerfile, base)
		}
	}
	// Both images come from one checkout: one release.
	tags := map[string]bool{}
	for ref := range images {
		_, tag, _ := strings.Cut(ref, ":")
		tags[tag] = true
	}
	if len(tags) != 1 {
		t.Errorf("the images carry different tags %v; build and tag both from one release", tags)
	}
}

func ptrOr(p *corev1.Protocol) corev1.Protocol {
	if p == nil {
		return ""
	}
	return *p
}

// TestExecutorTarget checks that the orchestrator's --executor names the
// headless Service by its cluster DNS name and port, and that the name its
// certificate check expects is that name.
func TestExecutorTarget(t *testing.T) {
	m := load(t)
	svc := m.service(t, toolsvcName)
	host := svc.Name + "." + svc.Namespace + "." + clusterDomain
	want := "dns:///" + host + ":" + strconv.Itoa(int(servicePort(t, svc, "grpc").Port))
	args := effectiveArgs(t, container(t, m.deployment(t, orchestratorName)))
	if got, _ := flagValue(args, "executor"); got != want {
		t.Errorf("--executor=%q, want %q", got, want)
	}
	// The orchestrator dials pod addresses; the certificate names the
	// Service.
	if got, _ := flagValue(args, "executor-tls-server-name"); got != host {
		t.Errorf("--executor-tls-server-name=%q, want %q", got, host)
	}
	for _, f := range []string{"executor-tls-ca", "executor-tls-cert", "executor-tls-key"} {
		if _, ok := flagValue(args, f); !ok {
			t.Errorf("orchestrator has no --%s: the link to toolsvc must be mutual TLS", f)
		}
	}
	toolsvcArgs := effectiveArgs(t, container(t, m.deployment(t, toolsvcName)))
	for _, f := range []string{"tls-cert", "tls-key", "tls-client-ca"} {
		if _, ok := flagValue(toolsvcArgs, f); !ok {
			t.Errorf("toolsvc has no --%s: it must require client certificates", f)
		}
	}
}

// TestSecrets checks that every key or certificate a flag names is a file
// of a Secret mounted read-only, with a mode the tool user cannot read in
// toolsvc's pod, and that docs/deployment.md says how to create every
// Secret the manifests use.
func TestSecrets(t *testing.T) {
	m := load(t)
	used := map[string]bool{}
	for _, d := range m.deployments {
		pod := d.Spec.Template.Spec
		vols := map[string]corev1.Volume{}
		for _, v := range pod.Volumes {
			vols[v.Name] = v
		}
		for i := range pod.Containers {
			c := &pod.Containers[i]
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					used[e.ValueFrom.SecretKeyRef.Name] = true
				}
			}
			for _, vm := range c.VolumeMounts {
				if s := vols[vm.Name].Secret; s != nil {
					used[s.SecretName] = true
					if !vm.ReadOnly {
						t.Errorf("%s: Secret %s is mounted writable", c.Name, s.SecretName)
					}
					if s.DefaultMode == nil || *s.DefaultMode&0o027 != 0 {
						t.Errorf("%s: Secret %s has mode %v; want no group write and nothing for others", c.Name, s.SecretName, s.DefaultMode)
					}
					if c.Image == toolsvcImage && *s.DefaultMode != 0o400 {
						t.Errorf("%s: Secret %s mode %#o, want 0400 (root only, never the tool user)", c.Name, s.SecretName, *s.DefaultMode)
					}
				}
			}
			// The server's flags and its probes' flags.
			argLists := [][]string{effectiveArgs(t, c)}
			for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
				if p != nil && p.Exec != nil {
					argLists = append(argLists, p.Exec.Command)
				}
			}
			for _, args := range argLists {
				for _, f := range secretFlags {
					file, ok := flagValue(args, f)
					if !ok {
						continue
					}
					if !secretFile(c, vols, file) {
						t.Errorf("%s: --%s=%s is not a file of a Secret mounted read-only", c.Name, f, file)
					}
				}
			}
		}
	}
	doc, err := os.ReadFile(deploymentDoc)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, mt := range regexp.MustCompile(`kubectl -n `+namespace+` create secret generic ([a-z0-9-]+)`).FindAllSubmatch(doc, -1) {
		documented[string(mt[1])] = true
	}
	for name := range used {
		if !documented[name] {
			t.Errorf("Secret %s is used but %s does not show how to create it (kubectl -n %s create secret generic %s ...)", name, deploymentDoc, namespace, name)
		}
	}
}

// secretFile reports whether file is an item of a Secret volume mounted
// read-only in c.
func secretFile(c *corev1.Container, vols map[string]corev1.Volume, file string) bool {
	for _, vm := range c.VolumeMounts {
		s := vols[vm.Name].Secret
		if s == nil || !vm.ReadOnly {
			continue
		}
		rel, ok := strings.CutPrefix(path.Clean(file), path.Clean(vm.MountPath)+"/")
		if !ok {
			continue
		}
		if len(s.Items) == 0 {
			return true // every key of the Secret is a file
		}
		for _, it := range s.Items {
			if it.Path == rel {
				return true
			}
		}
	}
	return false
}

// effectiveArgs returns the arguments the container's program gets after
// its name: the image's ENTRYPOINT (or the container's command) followed by
// the container's args (or the image's CMD).
func effectiveArgs(t *testing.T, c *corev1.Container) []string {
	t.Helper()
	info, ok := images[c.Image]
	if !ok {
		t.Fatalf("container %s: unknown image %q", c.Name, c.Image)
	}
	entry, cmd := dockerfileExec(t, info.dockerfile)
	if len(c.Command) > 0 {
		entry, cmd = c.Command, nil
	}
	if c.Args != nil {
		cmd = c.Args
	}
	all := append(slices.Clone(entry), cmd...)
	if len(all) == 0 {
		t.Fatalf("container %s runs nothing", c.Name)
	}
	return all[1:]
}

// dockerfileExec returns the exec forms of a Dockerfile's ENTRYPOINT and
// CMD.
func dockerfileExec(t *testing.T, file string) (entry, cmd []string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("image Dockerfile: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		for _, instr := range []struct {
			name string
			dst  *[]string
		}{{"ENTRYPOINT ", &entry}, {"CMD ", &cmd}} {
			if rest, ok := strings.CutPrefix(line, instr.name); ok {
				if err := json.Unmarshal([]byte(rest), instr.dst); err != nil {
					t.Fatalf("%s: %s is not in exec form: %v", file, strings.TrimSpace(instr.name), err)
				}
			}
		}
	}
	return entry, cmd
}

// dockerfileArg returns the default of a Dockerfile's ARG.
func dockerfileArg(t *testing.T, file, name string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	mt := regexp.MustCompile(`(?m)^ARG ` + name + `=(\S+)$`).FindSubmatch(data)
	if mt == nil {
		t.Fatalf("%s has no ARG %s=...", file, name)
	}
	return string(mt[1])
}

// flagValue returns the last value of a Go flag in args, given as
// -name=v, --name=v, -name v or --name v; a boolean flag without a value
// yields "true".
func flagValue(args []string, name string) (string, bool) {
	val, found := "", false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		k, v, hasV := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if k != name {
			continue
		}
		switch {
		case hasV:
			val = v
		case i+1 < len(args) && !strings.HasPrefix(args[i+1], "-"):
			i++
			val = args[i]
		default:
			val = "true"
		}
		found = true
	}
	return val, found
}

// listenPort is the TCP port of --listen.
func listenPort(t *testing.T, args []string) int32 {
	t.Helper()
	addr, ok := flagValue(args, "listen")
	if !ok {
		t.Fatalf("no --listen in %q", args)
	}
	i := strings.LastIndex(addr, ":")
	port, err := strconv.ParseInt(addr[i+1:], 10, 32)
	if i < 0 || err != nil {
		t.Fatalf("--listen=%q is not host:port", addr)
	}
	return int32(port)
}
