package csi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/stratafs/strata/internal/config"
)

// Volume attribute keys (PV spec.csi.volumeAttributes, or an inline
// volume's csi.volumeAttributes).
const (
	AttrSource        = "source"        // s3://bucket[/prefix], gs://bucket[/prefix], file:///path (required)
	AttrMode          = "mode"          // sidecar (default) or node
	AttrCacheDir      = "cacheDir"      // sidecar mode only: cache directory inside the sidecar container
	AttrCacheSize     = "cacheSize"     // largest the cache may grow, e.g. 100GiB
	AttrMetadataTTL   = "metadataTTL"   // a duration, 0, or indefinite
	AttrReadOnly      = "readOnly"      // "true" (default) or "false" (checkpoint writes)
	AttrMemoryLimit   = "memoryLimit"   // in-flight buffer budget; sidecar default comes from the cgroup
	AttrEndpointURL   = "endpointURL"   // custom S3/GCS endpoint
	AttrRegion        = "region"        // S3 region
	AttrMountOptions  = "mountOptions"  // extra strata mount flags: "force-path-style,max-fetches=128"
	AttrHandoffVolume = "handoffVolume" // sidecar mode: the pod's emptyDir shared with the sidecar
	AttrReadAheadKB   = "readAheadKB"   // kernel readahead of the mount, KiB

	// Set by kubelet when the CSIDriver has podInfoOnMount: true.
	podInfoPrefix = "csi.storage.k8s.io/"
)

// Modes.
const (
	ModeSidecar = "sidecar"
	ModeNode    = "node"
)

// DefaultHandoffVolume is the emptyDir the examples share between the
// plugin and the sidecar.
const DefaultHandoffVolume = "strata-handoff"

var errBadAttr = errors.New("invalid volume attribute")

// Spec is a volume as the plugin mounts it.
type Spec struct {
	Source        string
	Mode          string
	CacheDir      string
	ReadOnly      bool
	HandoffVolume string
	ReadAheadKB   int
	// Args are the `strata mount` flags that follow from the attributes
	// (never a cache dir, log file or other host path in node mode).
	Args []string
	// PodNamespace and PodName are for logs only.
	PodNamespace, PodName string

	origin origin // PersistentVolume or inline: who wrote the attributes (policy.go)
}

// ParseSpec turns attributes into a Spec. Unknown keys are errors, so a
// typo in a PV fails NodePublishVolume instead of being ignored.
func ParseSpec(attrs map[string]string, readOnlyRequest bool) (Spec, error) {
	bad := func(f string, a ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("%w: "+f, append([]any{errBadAttr}, a...)...)
	}
	s := Spec{Mode: ModeSidecar, ReadOnly: true, HandoffVolume: DefaultHandoffVolume, ReadAheadKB: 1024}
	o, err := volumeOrigin(attrs)
	if err != nil {
		return Spec{}, err
	}
	s.origin = o
	for k, v := range attrs {
		switch k {
		case AttrSource:
			s.Source = v
		case AttrMode:
			if v != ModeSidecar && v != ModeNode {
				return bad("%s=%q: want %s or %s", k, v, ModeSidecar, ModeNode)
			}
			s.Mode = v
		case AttrCacheDir:
			if !strings.HasPrefix(v, "/") {
				return bad("%s=%q: want an absolute path inside the sidecar", k, v)
			}
			s.CacheDir = v
		case AttrReadOnly:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return bad("%s=%q: want true or false", k, v)
			}
			s.ReadOnly = b
		case AttrHandoffVolume:
			if v == "" || strings.ContainsAny(v, "/\x00") || v == "." || v == ".." {
				return bad("%s=%q: want a volume name", k, v)
			}
			s.HandoffVolume = v
		case AttrReadAheadKB:
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return bad("%s=%q: want a number of KiB", k, v)
			}
			s.ReadAheadKB = n
		case AttrEndpointURL:
			if v == "" {
				return bad("%s is empty", k)
			}
			if o != originPV {
				return Spec{}, fmt.Errorf("%w: %s changes where the volume's bytes come from; %s: set it in a PersistentVolume, "+
					"or on the driver with --mount-arg=--endpoint-url=URL", errNotAllowed, k, o.inlineWhy())
			}
		case AttrCacheSize, AttrMetadataTTL, AttrMemoryLimit, AttrRegion:
			if v == "" {
				return bad("%s is empty", k)
			}
		case AttrMountOptions:
		default:
			if strings.HasPrefix(k, podInfoPrefix) {
				continue
			}
			return bad("unknown key %q (known: %s)", k, strings.Join(knownAttrs(), ", "))
		}
	}
	if s.Source == "" {
		return bad("%s is required (s3://bucket[/prefix], gs://bucket[/prefix] or file:///path)", AttrSource)
	}
	// Parsed as the mount will parse it: the source is strata mount's
	// first argument, and one that is not a source (--config=/x://y) must
	// not reach its argument list.
	if _, err := config.ParseSource(s.Source); err != nil {
		return bad("%s: %v", AttrSource, err)
	}
	if s.CacheDir != "" && s.Mode == ModeNode {
		return bad("%s is for sidecar mode; node mode caches under the plugin's --cache-root", AttrCacheDir)
	}
	if readOnlyRequest {
		s.ReadOnly = true
	}
	flagFor := map[string]string{AttrCacheSize: "cache-size", AttrMetadataTTL: "metadata-ttl",
		AttrMemoryLimit: "memory-limit", AttrEndpointURL: "endpoint-url", AttrRegion: "region"}
	for _, k := range sortedKeys(flagFor) {
		if v, ok := attrs[k]; ok {
			s.Args = append(s.Args, "--"+flagFor[k]+"="+v)
		}
	}
	if v, ok := attrs[AttrReadAheadKB]; ok {
		s.Args = append(s.Args, "--read-ahead-kb="+v) // node mode; sidecar mounts get it from the plugin
	}
	s.Args = append(s.Args, "--read-only="+strconv.FormatBool(s.ReadOnly))
	extra, err := parseMountOptions(AttrMountOptions, attrs[AttrMountOptions], o)
	if err != nil {
		return Spec{}, err
	}
	s.Args = append(s.Args, extra...)
	s.PodNamespace, s.PodName = attrs[podInfoPrefix+"pod.namespace"], attrs[podInfoPrefix+"pod.name"]
	return s, nil
}

// parseMountOptions turns "a,b=1 c=2" into ["--a", "--b=1", "--c=2"],
// refusing a flag a volume of origin o may not set (policy.go); what
// names the option in errors.
func parseMountOptions(what, s string, o origin) ([]string, error) {
	var out []string
	for _, opt := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		opt = strings.TrimPrefix(opt, "--")
		name, _, _ := strings.Cut(opt, "=")
		if name == "" || strings.HasPrefix(name, "-") {
			return nil, fmt.Errorf("%w: %s: %q is not a flag", errBadAttr, what, opt)
		}
		if err := o.checkFlag(what, name); err != nil {
			return nil, err
		}
		out = append(out, "--"+opt)
	}
	return out, nil
}

func knownAttrs() []string {
	return []string{AttrSource, AttrMode, AttrCacheDir, AttrCacheSize, AttrMetadataTTL, AttrReadOnly,
		AttrMemoryLimit, AttrEndpointURL, AttrRegion, AttrMountOptions, AttrHandoffVolume, AttrReadAheadKB}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ShareKey identifies a node-mode mount: volumes with the same source,
// arguments and credentials share one; anything else gets its own.
func (s Spec) ShareKey(c Credentials) string {
	env, files := c.Env, c.Files
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", s.Source)
	for _, a := range s.Args {
		fmt.Fprintf(h, "%s\x00", a)
	}
	h.Write([]byte{1})
	for _, k := range sortedKeys(env) {
		fmt.Fprintf(h, "%s=%s\x00", k, env[k])
	}
	for _, k := range sortedKeys(files) {
		fmt.Fprintf(h, "%s=%x\x00", k, sha256.Sum256(files[k]))
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}

// Credentials come from the volume's nodePublishSecretRef (the request's
// Secrets map), and hold credentials only: the keys the backends'
// credential providers read (SecretEnv) become the mount process's
// environment, and a Google credentials file (key.json) becomes a file
// named by GOOGLE_APPLICATION_CREDENTIALS. Any other key is refused: in a
// secret it would change how the mount runs (HTTPS_PROXY, GODEBUG,
// STRATA_PPROF), where its bytes come from (AWS_ENDPOINT_URL,
// STORAGE_EMULATOR_HOST) or which files on the node it reads
// (AWS_CONFIG_FILE, AWS_PROFILE, GOOGLE_APPLICATION_CREDENTIALS), and in
// node mode the mount runs in the privileged plugin. Without a secret the
// mount uses the ambient identity: the pod's service account in sidecar
// mode, the plugin's in node mode. Values are never logged; errors name
// keys only.

// GCSKeyFile is the secret key holding a GCS service-account JSON key.
const GCSKeyFile = "key.json"

// SecretEnv are the secret keys passed to the mount as environment: what
// the AWS SDK's environment credential provider reads.
var SecretEnv = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}

var errBadSecret = errors.New("invalid secret")

// secretHints explain the refusal of keys people put in secrets.
var secretHints = map[string]string{
	"AWS_REGION":                     "use the " + AttrRegion + " volume attribute",
	"AWS_DEFAULT_REGION":             "use the " + AttrRegion + " volume attribute",
	"AWS_ENDPOINT_URL":               "the endpoint comes from a PersistentVolume's " + AttrEndpointURL + " or the driver",
	"AWS_ENDPOINT_URL_S3":            "the endpoint comes from a PersistentVolume's " + AttrEndpointURL + " or the driver",
	"STORAGE_EMULATOR_HOST":          "the endpoint comes from a PersistentVolume's " + AttrEndpointURL + " or the driver",
	"GOOGLE_APPLICATION_CREDENTIALS": "put the key itself in " + GCSKeyFile,
}

// Credentials split a secret into environment and files.
type Credentials struct {
	Env   map[string]string
	Files map[string][]byte // name -> content; the env var naming each is in Env
}

// ParseSecrets validates a request's secrets.
func ParseSecrets(secrets map[string]string) (Credentials, error) {
	c := Credentials{Env: map[string]string{}, Files: map[string][]byte{}}
	for _, k := range sortedKeys(secrets) {
		v := secrets[k]
		switch {
		case k == GCSKeyFile:
			c.Files[GCSKeyFile] = []byte(v)
		case slices.Contains(SecretEnv, k):
			// AWS keys, secrets and session tokens are printable ASCII.
			// Anything else cannot authenticate, and a control character
			// makes the request unsendable, which the mount takes for an
			// unreachable endpoint: with metadataTTL indefinite it then
			// started offline on the node-mode cache of the key id's
			// owner without the backend checking the secret
			// (TestCSINodeCacheNeedsTheBackendsYes).
			if i := strings.IndexFunc(v, func(r rune) bool { return r <= ' ' || r > '~' }); i >= 0 {
				return Credentials{}, fmt.Errorf("%w: key %q: its value has a space, control or non-ASCII character at byte %d "+
					"(a trailing newline?); credentials are printable ASCII", errBadSecret, k, i)
			}
			c.Env[k] = v
		default:
			hint := secretHints[k]
			if hint == "" {
				hint = "it is not a credential"
			}
			return Credentials{}, fmt.Errorf("%w: key %q refused (%s): a secret may hold only %s and %s",
				errBadSecret, k, hint, strings.Join(SecretEnv, ", "), GCSKeyFile)
		}
	}
	return c, nil
}

// Environ renders the environment for a process, with fileDir the
// directory the files were written to.
func (c Credentials) Environ(fileDir string) []string {
	var out []string
	for _, k := range sortedKeys(c.Env) {
		out = append(out, k+"="+c.Env[k])
	}
	if _, ok := c.Files[GCSKeyFile]; ok {
		out = append(out, "GOOGLE_APPLICATION_CREDENTIALS="+fileDir+"/"+GCSKeyFile)
	}
	return out
}

// Empty reports whether no credentials were given.
func (c Credentials) Empty() bool { return len(c.Env) == 0 && len(c.Files) == 0 }
