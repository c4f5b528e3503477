package deploytest

// TestChart renders deploy/helm/packbot with Helm's own packages (as `helm template` does) for
// the default values and for three replicas on an external PostgreSQL, decodes every object
// strictly into its Kubernetes API type (an unknown or misplaced field is an error), checks
// what deployers rely on, and lints the chart as `helm lint` does. TestChartKubePlay runs the
// rendered Deployment and its ConfigMap with `podman kube play` and chats with the pod.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

func chartDir() string { return filepath.Join(root, "deploy", "helm", "packbot") }

// render renders the chart with vals over its defaults, as `helm template demo` does, and
// decodes every object strictly.
func render(t *testing.T, vals map[string]any) []runtime.Object {
	t.Helper()
	objs, err := tryRender(vals)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func tryRender(vals map[string]any) ([]runtime.Object, error) {
	ch, err := loader.Load(chartDir())
	if err != nil {
		return nil, err
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "demo", Namespace: "bots", IsInstall: true, Revision: 1},
		chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var objs []runtime.Object
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTES.txt, _helpers.tpl
		}
		for _, doc := range releaseutil.SplitManifests(files[name]) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			obj, gvk, err := decoder.Decode([]byte(doc), nil, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: decode %v strictly: %w\n%s", name, gvk, err, doc)
			}
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

func find[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func TestChart(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		objs := render(t, nil)
		deps, svcs, pdbs := find[*appsv1.Deployment](objs), find[*corev1.Service](objs), find[*policyv1.PodDisruptionBudget](objs)
		if len(deps) != 1 || len(svcs) != 1 || len(pdbs) != 1 || len(find[*corev1.ConfigMap](objs)) != 0 || len(objs) != 3 {
			t.Fatalf("objects: %d (%d Deployment, %d Service, %d PDB)", len(objs), len(deps), len(svcs), len(pdbs))
		}
		d := deps[0]
		if *d.Spec.Replicas != 1 {
			t.Errorf("replicas %d", *d.Spec.Replicas)
		}
		pod, c := d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0]
		if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" ||
			c.LivenessProbe.HTTPGet.Port.StrVal != "admin" || c.ReadinessProbe.HTTPGet.Port.StrVal != "admin" {
			t.Errorf("probes: %+v %+v", c.LivenessProbe, c.ReadinessProbe)
		}
		if !*pod.SecurityContext.RunAsNonRoot || *pod.SecurityContext.RunAsUser != 65532 || !*c.SecurityContext.ReadOnlyRootFilesystem ||
			*c.SecurityContext.AllowPrivilegeEscalation || !slices.Equal(c.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("security context: %+v %+v", pod.SecurityContext, c.SecurityContext)
		}
		env := envOf(c)
		if env["PACKBOT_ADMIN_ADDR"].Value != "0.0.0.0:9090" || env["PACKBOT_HTTP_ADDR"].Value != "0.0.0.0:8080" {
			t.Errorf("listeners: %+v", c.Env)
		}
		if _, ok := env["POSTGRES_HOST"]; ok {
			t.Errorf("a database by default: %+v", c.Env)
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("resources: %+v", c.Resources)
		}
		if svcs[0].Spec.Ports[0].TargetPort.StrVal != "public" {
			t.Errorf("service: %+v", svcs[0].Spec.Ports)
		}
	})

	t.Run("three replicas, external PostgreSQL", func(t *testing.T) {
		vals, err := chartutil.ReadValuesFile(filepath.Join("testdata", "replicas-external-pg.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		objs := render(t, vals)
		deps, cms := find[*appsv1.Deployment](objs), find[*corev1.ConfigMap](objs)
		if len(deps) != 1 || len(cms) != 1 || *deps[0].Spec.Replicas != 3 {
			t.Fatalf("%d Deployment(s), %d ConfigMap(s)", len(deps), len(cms))
		}
		c := deps[0].Spec.Template.Spec.Containers[0]
		env := envOf(c)
		if env["POSTGRES_HOST"].Value != "pg.example.com" || env["AGENT_PACK_PATH"].Value != "/agent-packs" ||
			env["PACKBOT_PUBLIC_URL"].Value != "https://bot.example.com" {
			t.Errorf("env: %+v", c.Env)
		}
		for name, secret := range map[string]string{"POSTGRES_PASSWORD": "packbot-db", "MCP_CONFIG_ENCRYPTION_KEY": "packbot-keys",
			"PACKBOT_DIDCOMM_KEY": "packbot-keys", "OPENAI_API_KEY": "packbot-llm"} {
			if ref := env[name].ValueFrom; ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != secret || env[name].Value != "" {
				t.Errorf("%s: want a reference to Secret %s: %+v", name, secret, env[name])
			}
		}
		if !strings.Contains(cms[0].Data["agent-pack.yaml"], "displayName: Example") {
			t.Errorf("pack ConfigMap: %v", cms[0].Data)
		}
		// The pack is mounted as a folder (no subPath), so that the kubelet's update of the
		// ConfigMap reaches the running pods and is swapped in live; and no checksum annotation
		// restarts them when it changes.
		for _, m := range c.VolumeMounts {
			if m.MountPath == "/agent-packs" && m.SubPath != "" {
				t.Errorf("pack mounted with subPath: %+v", m)
			}
		}
		if len(deps[0].Spec.Template.Annotations) != 0 {
			t.Errorf("pod annotations: %v", deps[0].Spec.Template.Annotations)
		}
		if vol := deps[0].Spec.Template.Spec.Volumes[0]; vol.PersistentVolumeClaim == nil || vol.PersistentVolumeClaim.ClaimName != "packbot-data" {
			t.Errorf("data volume: %+v", vol)
		}
	})

	t.Run("refused values", func(t *testing.T) {
		for want, vals := range map[string]map[string]any{
			"needs PostgreSQL":            {"replicaCount": 2},
			"needs secrets.didcommKey":    {"replicaCount": 2, "database": map[string]any{"host": "pg"}},
			"needs secrets.webhookSecret": {"vsAgent": map[string]any{"adminUrl": "http://vs-agent:3000"}},
		} {
			if _, err := tryRender(vals); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v: err %v, want %q", vals, err, want)
			}
		}
	})

	t.Run("lint", func(t *testing.T) {
		for _, vals := range []string{"", filepath.Join("testdata", "replicas-external-pg.yaml")} {
			var v map[string]any
			if vals != "" {
				var err error
				if v, err = chartutil.ReadValuesFile(vals); err != nil {
					t.Fatal(err)
				}
			}
			for _, m := range lint.All(chartDir(), v, "bots", false).Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("helm lint (%s): %s", vals, m)
				}
			}
		}
	})
}

func TestChartKubePlay(t *testing.T) {
	buildImage(t)
	pack, err := os.ReadFile(filepath.Join(root, "packs", "demo", "agent-pack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	public, admin := freePort(t), freePort(t)
	objs := render(t, map[string]any{
		"image":     map[string]any{"repository": "localhost/packbot", "tag": "test", "pullPolicy": "Never"},
		"publicUrl": fmt.Sprintf("http://127.0.0.1:%d", public),
		"pack":      string(pack),
		"env":       map[string]any{"OPENAI_BASE_URL": devLLM(t)},
	})
	// What a cluster's Service would do, podman does with host ports: publish both listeners.
	var docs []string
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			c := &d.Spec.Template.Spec.Containers[0]
			for i, p := range c.Ports {
				c.Ports[i].HostPort = map[string]int32{"public": int32(public), "admin": int32(admin)}[p.Name]
			}
		}
		if _, ok := o.(*corev1.Service); ok {
			continue // podman kube play makes no Services
		}
		if _, ok := o.(*policyv1.PodDisruptionBudget); ok {
			continue
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	file := filepath.Join(t.TempDir(), "kube.yaml")
	if err := writeFile(file, strings.Join(docs, "---\n")); err != nil {
		t.Fatal(err)
	}
	podman(t, "kube", "play", file)
	t.Cleanup(func() { _, _ = tryRun("", nil, "podman", "kube", "play", "--down", file) })
	// The pod is named after the Deployment, its container after the pod and the chart's
	// container ("demo-packbot-pod-0-packbot" in podman 4.3).
	var ctr string
	for _, name := range strings.Fields(podman(t, "ps", "--filter", "name=demo-packbot-pod", "--format", "{{.Names}}")) {
		if strings.HasSuffix(name, "-packbot") {
			ctr = name
		}
	}
	if ctr == "" {
		t.Fatalf("no packbot container:\n%s", podman(t, "ps", "-a"))
	}

	// The probes, as the kubelet would run them: HTTP GETs on the admin port. (podman 4.3 turns
	// an httpGet probe into a healthcheck that runs curl inside the container: the image has
	// none, so podman's own health status says nothing here.)
	dep := find[*appsv1.Deployment](objs)[0]
	c := dep.Spec.Template.Spec.Containers[0]
	ctx := ctxFor(t, 3*time.Minute)
	for _, probe := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		url := fmt.Sprintf("http://127.0.0.1:%d%s", admin, probe.HTTPGet.Path)
		if err := waitFor(ctx, url, func() bool { return status(url) == 200 }); err != nil {
			out, _ := exec.Command("podman", "logs", "--tail", "60", ctr).CombinedOutput()
			t.Fatalf("%v\n%s", err, out)
		}
	}
	if ro := podman(t, "inspect", "--format", "{{.HostConfig.ReadonlyRootfs}} {{.Config.User}}", ctr); !strings.HasPrefix(ro, "true 65532") {
		t.Fatalf("read-only root and user: %s", ro)
	}

	dir := t.TempDir()
	issue(t, filepath.Join(dir, "ana"), filepath.Join(dir, "ana.json"), "ana@acme.corp", "employee")
	w := hostWallet(t, "Ana", filepath.Join(dir, "ana"), fmt.Sprintf("http://127.0.0.1:%d/invitation", public),
		"--credential", filepath.Join(dir, "ana.json"))
	w.login()
	w.say(`get_balances {}`, "get_balances said:")
}
