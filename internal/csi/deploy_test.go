package csi

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The Kubernetes manifests in deploy/kubernetes decode strictly (an
// unknown or misspelt field is an error) into the API types, every file is
// listed in its kustomization, and the volumes in them are ones this
// driver accepts: a typo in deploy/ fails here, not on a cluster.

const deployDir = "../../deploy/kubernetes"

type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
}

// newObject returns the API type for apiVersion/kind.
func newObject(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "v1/Namespace":
		return &corev1.Namespace{}
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1/Secret":
		return &corev1.Secret{}
	case "v1/PersistentVolume":
		return &corev1.PersistentVolume{}
	case "v1/PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}
	case "v1/Pod":
		return &corev1.Pod{}
	case "apps/v1/DaemonSet":
		return &appsv1.DaemonSet{}
	case "batch/v1/Job":
		return &batchv1.Job{}
	case "storage.k8s.io/v1/CSIDriver":
		return &storagev1.CSIDriver{}
	case "rbac.authorization.k8s.io/v1/ClusterRole":
		return &rbacv1.ClusterRole{}
	case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}
	case "kustomize.config.k8s.io/v1beta1/Kustomization":
		return &kustomization{}
	}
	return nil
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// loadManifests decodes every YAML document under dir, by file.
func loadManifests(t *testing.T, dir string) map[string][]any {
	t.Helper()
	out := map[string][]any{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, doc := range docSep.Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var tm struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Errorf("%s doc %d: %v", p, i, err)
				continue
			}
			obj := newObject(tm.APIVersion, tm.Kind)
			if obj == nil {
				t.Errorf("%s doc %d: unknown apiVersion/kind %q/%q", p, i, tm.APIVersion, tm.Kind)
				continue
			}
			if err := decodeStrict([]byte(doc), obj); err != nil {
				t.Errorf("%s doc %d (%s): %v", p, i, tm.Kind, err)
				continue
			}
			out[p] = append(out[p], obj)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no manifests under %s", dir)
	}
	return out
}

// decodeStrict decodes YAML the way the API server's strict field
// validation does: case-sensitive field names, unknown and duplicate
// fields are errors (sigs.k8s.io/yaml alone matches names case-blind).
func decodeStrict(doc []byte, obj any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestStrictDecodeCatchesTypos(t *testing.T) {
	tests := []struct {
		doc string
		ok  bool
	}{
		{"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n", true},
		{"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, imagee: i}]}\n", false},
		{"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {restartpolicy: Never}\n", false},
		{"apiVersion: v1\nkind: Pod\nmetadata: {name: p, name: q}\n", false},
	}
	for _, tc := range tests {
		err := decodeStrict([]byte(tc.doc), &corev1.Pod{})
		if (err == nil) != tc.ok {
			t.Errorf("UnmarshalStrict(%q) = %v, want ok=%v", tc.doc, err, tc.ok)
		}
	}
}

func TestDeployManifests(t *testing.T) {
	byFile := loadManifests(t, deployDir)
	pvs := map[string]*corev1.PersistentVolume{}
	claims := map[string]string{} // claim -> PV
	var drivers, daemonsets int
	inlineNode := false // the DaemonSet runs with --allow-inline-node-mode
	for _, objs := range byFile {
		for _, o := range objs {
			switch o := o.(type) {
			case *corev1.PersistentVolume:
				pvs[o.Name] = o
			case *corev1.PersistentVolumeClaim:
				claims[o.Name] = o.Spec.VolumeName
			case *storagev1.CSIDriver:
				drivers++
				if o.Name != DriverName {
					t.Errorf("CSIDriver %q, want %q", o.Name, DriverName)
				}
				if o.Spec.AttachRequired == nil || *o.Spec.AttachRequired || o.Spec.PodInfoOnMount == nil || !*o.Spec.PodInfoOnMount {
					t.Error("CSIDriver: want attachRequired false and podInfoOnMount true")
				}
			case *appsv1.DaemonSet:
				daemonsets++
				inlineNode = checkDaemonSet(t, o)
			}
		}
	}
	if drivers != 1 || daemonsets != 1 {
		t.Errorf("%d CSIDrivers and %d DaemonSets, want one each", drivers, daemonsets)
	}
	for file, objs := range byFile {
		for _, o := range objs {
			switch o := o.(type) {
			case *kustomization:
				checkKustomization(t, file, o)
			case *corev1.PersistentVolume:
				if o.Spec.CSI != nil && o.Spec.CSI.Driver == DriverName {
					if _, err := ParseSpec(kubeletAttrs(o.Spec.CSI.VolumeAttributes, false), o.Spec.CSI.ReadOnly); err != nil {
						t.Errorf("%s: PV %s: %v", file, o.Name, err)
					}
				}
			case *corev1.Pod:
				checkPod(t, file, "pod "+o.Name, &o.Spec, pvs, claims, inlineNode)
			case *batchv1.Job:
				checkPod(t, file, "job "+o.Name, &o.Spec.Template.Spec, pvs, claims, inlineNode)
			}
		}
	}
}

// checkKustomization: every resource exists and every manifest beside it
// is listed.
func checkKustomization(t *testing.T, file string, k *kustomization) {
	dir := filepath.Dir(file)
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
			t.Errorf("%s: resource %s: %v", file, r, err)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".yaml") && n != "kustomization.yaml" && !slices.Contains(k.Resources, n) {
			t.Errorf("%s: %s is not listed in resources", file, n)
		}
	}
}

// checkDaemonSet checks the plugin's container and reports whether it
// allows node mode for inline volumes.
func checkDaemonSet(t *testing.T, ds *appsv1.DaemonSet) (inlineNode bool) {
	var args []string
	registrar := false
	for _, c := range ds.Spec.Template.Spec.Containers {
		switch {
		case slices.Contains(c.Args, "csi"):
			args = c.Args
			if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
				t.Error("DaemonSet: the strata csi container must be privileged")
			}
		case strings.Contains(c.Image, "node-driver-registrar"):
			registrar = slices.Contains(c.Args, "--kubelet-registration-path=/var/lib/kubelet/plugins/"+DriverName+"/csi.sock")
		}
	}
	if !slices.Contains(args, "--endpoint=unix:///csi/csi.sock") || !registrar {
		t.Errorf("DaemonSet: strata args %v / registrar path must name /csi/csi.sock and %s", args, DriverName)
	}
	return slices.Contains(args, "--allow-inline-node-mode") || slices.Contains(args, "--allow-inline-node-mode=true")
}

// kubeletAttrs are a volume's attributes as kubelet passes them to
// NodePublishVolume with podInfoOnMount: true.
func kubeletAttrs(attrs map[string]string, inline bool) map[string]string {
	out := map[string]string{AttrEphemeral: strconv.FormatBool(inline)}
	for k, v := range attrs {
		out[k] = v
	}
	return out
}

// checkPod: every Strata volume parses as the volume it is (inline or
// PV), a sidecar-mode one has the hand-off emptyDir and a native `strata
// sidecar` mounting it, and an inline node-mode one is allowed by the
// DaemonSet or its file says the driver needs --allow-inline-node-mode.
func checkPod(t *testing.T, file, what string, pod *corev1.PodSpec, pvs map[string]*corev1.PersistentVolume, claims map[string]string, inlineNode bool) {
	where := file + ": " + what
	for _, v := range pod.Volumes {
		var attrs map[string]string
		readOnly := false
		switch {
		case v.CSI != nil && v.CSI.Driver == DriverName:
			attrs = kubeletAttrs(v.CSI.VolumeAttributes, true)
			readOnly = v.CSI.ReadOnly != nil && *v.CSI.ReadOnly
		case v.PersistentVolumeClaim != nil:
			pv := pvs[claims[v.PersistentVolumeClaim.ClaimName]]
			if pv == nil {
				t.Errorf("%s: claim %s has no PV in deploy/", where, v.PersistentVolumeClaim.ClaimName)
				continue
			}
			attrs, readOnly = kubeletAttrs(pv.Spec.CSI.VolumeAttributes, false), pv.Spec.CSI.ReadOnly
		default:
			continue
		}
		spec, err := ParseSpec(attrs, readOnly)
		if err != nil {
			t.Errorf("%s: volume %s: %v", where, v.Name, err)
			continue
		}
		if err := spec.checkInlineNodeMode(inlineNode); err != nil {
			if b, _ := os.ReadFile(file); !strings.Contains(string(b), "--allow-inline-node-mode") {
				t.Errorf("%s: volume %s: %v (and the file does not say the driver needs it)", where, v.Name, err)
			}
		}
		if spec.Mode == ModeSidecar {
			checkSidecar(t, where, pod, spec.HandoffVolume)
		}
	}
}

func checkSidecar(t *testing.T, where string, pod *corev1.PodSpec, handoff string) {
	// On disk, not tmpfs: kubelet may mount a Memory emptyDir over the
	// directory after the plugin put the socket there, hiding it.
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Name == handoff && v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumDefault
	}) {
		t.Errorf("%s: sidecar mode needs a (disk) emptyDir volume named %s", where, handoff)
	}
	for _, c := range pod.InitContainers {
		if len(c.Args) == 0 || c.Args[0] != "sidecar" {
			continue
		}
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Errorf("%s: strata sidecar must be a native sidecar (restartPolicy: Always)", where)
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == handoff && m.MountPath == "/strata-handoff" }) {
			t.Errorf("%s: strata sidecar must mount %s at /strata-handoff", where, handoff)
		}
		if c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: strata sidecar without a memory limit is unbounded", where)
		}
		if c.StartupProbe == nil {
			t.Errorf("%s: strata sidecar without a startup probe lets the app start before the mount is served", where)
		}
		return
	}
	t.Errorf("%s: sidecar-mode volume but no `strata sidecar` init container", where)
}
