package validate

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/config"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const kubeDir = "../kubernetes"

// manifests are the objects of deploy/kubernetes, decoded strictly.
type manifests struct {
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	services     map[string]*corev1.Service
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	pdbs         map[string]*policyv1.PodDisruptionBudget
	// files are the files each object came from, by kind/name.
	files map[string]string
}

// documents splits a YAML stream into its documents.
func documents(data []byte) [][]byte {
	var out [][]byte
	for _, d := range bytes.Split(data, []byte("\n---\n")) {
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			out = append(out, d)
		}
	}
	return out
}

func stripComments(d []byte) []byte {
	var b bytes.Buffer
	for _, l := range bytes.Split(d, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			b.Write(l)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// kustomization is what deploy/kubernetes/kustomization.yaml may hold.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Resources []string         `json:"resources"`
	Images    []kustomizeImage `json:"images"`
}

// kustomizeImage is an entry of images: in kustomization.yaml.
type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName"`
	NewTag  string `json:"newTag"`
}

func loadManifests(t *testing.T) (*manifests, *kustomization) {
	t.Helper()
	m := &manifests{
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		services: map[string]*corev1.Service{}, deployments: map[string]*appsv1.Deployment{},
		statefulSets: map[string]*appsv1.StatefulSet{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		files: map[string]string{},
	}
	var k *kustomization
	files, err := filepath.Glob(filepath.Join(kubeDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", kubeDir, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range documents(data) {
			where := fmt.Sprintf("%s (document %d)", filepath.Base(f), i+1)
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal(d, &meta); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			var obj any
			switch meta.APIVersion + " " + meta.Kind {
			case "v1 ConfigMap":
				o := &corev1.ConfigMap{}
				m.configMaps[meta.Metadata.Name], obj = o, o
			case "v1 Secret":
				o := &corev1.Secret{}
				m.secrets[meta.Metadata.Name], obj = o, o
			case "v1 Service":
				o := &corev1.Service{}
				m.services[meta.Metadata.Name], obj = o, o
			case "apps/v1 Deployment":
				o := &appsv1.Deployment{}
				m.deployments[meta.Metadata.Name], obj = o, o
			case "apps/v1 StatefulSet":
				o := &appsv1.StatefulSet{}
				m.statefulSets[meta.Metadata.Name], obj = o, o
			case "policy/v1 PodDisruptionBudget":
				o := &policyv1.PodDisruptionBudget{}
				m.pdbs[meta.Metadata.Name], obj = o, o
			case "kustomize.config.k8s.io/v1beta1 Kustomization":
				k = &kustomization{}
				obj = k
			default:
				t.Fatalf("%s: %s %s is not a kind this check knows; add it", where, meta.APIVersion, meta.Kind)
			}
			// As the API server decodes: unknown fields and wrong types
			// are errors.
			if err := yaml.UnmarshalStrict(d, obj); err != nil {
				t.Errorf("%s: %s %q: %v", where, meta.Kind, meta.Metadata.Name, err)
			}
			m.files[meta.Kind+"/"+meta.Metadata.Name] = filepath.Base(f)
		}
	}
	if k == nil {
		t.Fatal("no kustomization.yaml")
	}
	return m, k
}

func TestKubernetesManifests(t *testing.T) {
	m, k := loadManifests(t)

	// kubectl apply -k takes every manifest but the secrets' example.
	for key, file := range m.files {
		if file == "kustomization.yaml" {
			continue
		}
		if listed := slices.Contains(k.Resources, file); listed == (file == "secrets.example.yaml") {
			t.Errorf("%s (%s): listed in kustomization.yaml: %v", key, file, listed)
		}
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join(kubeDir, r)); err != nil {
			t.Errorf("kustomization.yaml: %v", err)
		}
	}

	// Every image of the deployments can be set in the kustomization
	// (kustomize edit set image), since gmgate publishes none.
	for name, dep := range m.deployments {
		for _, c := range dep.Spec.Template.Spec.Containers {
			image, _, _ := strings.Cut(c.Image, ":")
			if !slices.ContainsFunc(k.Images, func(i kustomizeImage) bool { return i.Name == image }) {
				t.Errorf("deployment %s: image %s has no images: entry in kustomization.yaml", name, c.Image)
			}
		}
	}

	d := m.deployments["gmgate"]
	if d == nil {
		t.Fatal("no Deployment gmgate")
	}
	spec := d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("Deployment gmgate: replicas %v, want 3", d.Spec.Replicas)
	}
	matches(t, "Deployment gmgate selector", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	if len(spec.Containers) != 1 {
		t.Fatalf("Deployment gmgate: %d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("gmgate: no %s HTTP probe", name)
			return
		}
		if p.HTTPGet.Path != path || p.HTTPGet.Port.StrVal != "admin" {
			t.Errorf("gmgate: %s probe on %s port %s, want %s on the admin port", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), path)
		}
	}
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("liveness", c.LivenessProbe, "/healthz")
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		t.Error("gmgate: no preStop hook to let the endpoint go before the drain")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Error("gmgate: no CPU and memory requests")
	}
	if grace := spec.TerminationGracePeriodSeconds; grace == nil || *grace < 35 {
		t.Errorf("gmgate: terminationGracePeriodSeconds %v does not cover the preStop pause and a 30s drain", grace)
	}

	// The volumes name objects that exist, and the keys they pick too.
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
		switch {
		case v.ConfigMap != nil:
			if m.configMaps[v.ConfigMap.Name] == nil {
				t.Errorf("volume %s: no ConfigMap %s", v.Name, v.ConfigMap.Name)
			}
		case v.Secret != nil:
			s := m.secrets[v.Secret.SecretName]
			if s == nil {
				t.Errorf("volume %s: no Secret %s (secrets.example.yaml says what each holds)", v.Name, v.Secret.SecretName)
				continue
			}
			for _, it := range v.Secret.Items {
				if _, ok := s.StringData[it.Key]; !ok {
					t.Errorf("volume %s: Secret %s has no key %s", v.Name, v.Secret.SecretName, it.Key)
				}
			}
		}
	}

	// gmgate.yaml: what gmgate's loader accepts, with every file it names
	// provided by a mount.
	cm := m.configMaps["gmgate"]
	if cm == nil || cm.Data["gmgate.yaml"] == "" {
		t.Fatal("no ConfigMap gmgate with gmgate.yaml")
	}
	cfgPath := ""
	for i, a := range c.Args {
		if a == "-c" && i+1 < len(c.Args) {
			cfgPath = c.Args[i+1]
		}
	}
	provided := func(path string) (string, bool) {
		for _, vm := range c.VolumeMounts {
			rel, ok := strings.CutPrefix(path, vm.MountPath+"/")
			if !ok {
				continue
			}
			v := volumes[vm.Name]
			switch {
			case v.ConfigMap != nil:
				_, ok := m.configMaps[v.ConfigMap.Name].Data[rel]
				return "ConfigMap " + v.ConfigMap.Name, ok
			case v.Secret != nil:
				s := m.secrets[v.Secret.SecretName]
				if s == nil {
					return "", false
				}
				if len(v.Secret.Items) > 0 {
					for _, it := range v.Secret.Items {
						if it.Path == rel {
							return "Secret " + s.Name, true
						}
					}
					return "Secret " + s.Name, false
				}
				_, ok := s.StringData[rel]
				return "Secret " + s.Name, ok
			}
		}
		return "", false
	}
	if from, ok := provided(cfgPath); !ok || from != "ConfigMap gmgate" {
		t.Errorf("gmgate -c %s: not the ConfigMap's gmgate.yaml", cfgPath)
	}
	cfg, err := config.Parse("configmap.yaml gmgate.yaml", []byte(cm.Data["gmgate.yaml"]))
	if err != nil {
		t.Fatalf("gmgate.yaml in the ConfigMap: %v", err)
	}
	for _, f := range configFiles(cfg) {
		if from, ok := provided(f); !ok {
			t.Errorf("gmgate.yaml names %s, which no mounted ConfigMap or Secret key provides (%s)", f, from)
		}
	}
	wantPort := func(what, addr string, port int32) {
		_, p, err := net.SplitHostPort(addr)
		if err != nil || p != fmt.Sprint(port) {
			t.Errorf("%s %s: not the container port %d", what, addr, port)
		}
	}
	wantPort("admin.listen", cfg.Admin.Listen, ports["admin"])
	wantPort("listeners[0].listen", cfg.Listeners[0].Listen, ports["edge"])
	if !cfg.Listeners[0].SharedSessions || cfg.SessionStore == nil {
		t.Error("gmgate.yaml: the edge listener does not share its sessions")
	}

	// The Service and the PodDisruptionBudget select the pods, on ports
	// they have.
	svc := m.services["gmgate"]
	if svc == nil {
		t.Fatal("no Service gmgate")
	}
	matches(t, "Service gmgate", svc.Spec.Selector, d.Spec.Template.Labels)
	for _, p := range svc.Spec.Ports {
		if _, ok := ports[p.TargetPort.StrVal]; !ok {
			t.Errorf("Service gmgate port %d: no container port %q", p.Port, p.TargetPort.String())
		}
	}
	pdb := m.pdbs["gmgate"]
	if pdb == nil {
		t.Fatal("no PodDisruptionBudget gmgate")
	}
	matches(t, "PodDisruptionBudget gmgate", pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() >= int(*d.Spec.Replicas) {
		t.Errorf("PodDisruptionBudget gmgate: minAvailable %v leaves no replica to drain", pdb.Spec.MinAvailable)
	}

	// Redis: the address gmgate.yaml gives is the Redis Service's.
	host, port, err := net.SplitHostPort(cfg.SessionStore.Redis.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	rsvc := m.services[host]
	if rsvc == nil {
		t.Fatalf("session_store.redis.addrs: no Service %s", host)
	}
	ss := m.statefulSets[host]
	if ss == nil {
		t.Fatalf("no StatefulSet %s behind the Service", host)
	}
	matches(t, "Service "+host, rsvc.Spec.Selector, ss.Spec.Template.Labels)
	matches(t, "StatefulSet "+host+" selector", ss.Spec.Selector.MatchLabels, ss.Spec.Template.Labels)
	if ss.Spec.ServiceName != host {
		t.Errorf("StatefulSet %s: serviceName %q", host, ss.Spec.ServiceName)
	}
	redisPorts := map[string]int32{}
	for _, p := range ss.Spec.Template.Spec.Containers[0].Ports {
		redisPorts[p.Name] = p.ContainerPort
	}
	found := false
	for _, p := range rsvc.Spec.Ports {
		if fmt.Sprint(p.Port) == port {
			found = true
			if _, ok := redisPorts[p.TargetPort.StrVal]; !ok {
				t.Errorf("Service %s: no container port %q", host, p.TargetPort.String())
			}
		}
	}
	if !found {
		t.Errorf("Service %s has no port %s", host, port)
	}
	for _, e := range ss.Spec.Template.Spec.Containers[0].Env {
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			if s := m.secrets[ref.SecretKeyRef.Name]; s == nil || s.StringData[ref.SecretKeyRef.Key] == "" {
				t.Errorf("Redis env %s: no Secret %s key %s", e.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
			}
		}
	}
}

// configFiles are the files a configuration names that must exist.
func configFiles(cfg *config.Config) []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		// A key reference: file:PATH?params.
		s = strings.TrimPrefix(s, "file:")
		s, _, _ = strings.Cut(s, "?")
		out = append(out, s)
	}
	add(cfg.Admin.TokenFile)
	add(cfg.Admin.Cert)
	add(cfg.Admin.Key)
	add(cfg.Admin.ClientCA)
	if ss := cfg.SessionStore; ss != nil {
		add(ss.KeysFile)
		if r := ss.Redis; r != nil {
			add(r.PasswordFile)
			if r.TLS != nil {
				add(r.TLS.CA)
				add(r.TLS.Cert)
				add(r.TLS.Key)
			}
		}
	}
	for _, l := range cfg.Listeners {
		if t := l.TLCP; t != nil {
			add(t.SignCert)
			add(t.SignKey)
			add(t.EncCert)
			add(t.EncKey)
			add(t.ClientCA)
		}
		if t := l.TLS; t != nil {
			add(t.Cert)
			add(t.Key)
			add(t.ClientCA)
		}
	}
	return out
}

func matches(t *testing.T, what string, selector, labels map[string]string) {
	t.Helper()
	if len(selector) == 0 {
		t.Errorf("%s: empty selector", what)
	}
	for k, v := range selector {
		if labels[k] != v {
			t.Errorf("%s: selects %s=%s, which the pods do not carry", what, k, v)
		}
	}
}
