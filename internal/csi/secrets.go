package csi

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Credentials come from the volume's nodePublishSecretRef (the request's
// Secrets map). Keys that look like environment variables
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// AWS_REGION, ...) become the mount process's environment; a GCS
// service-account key (key.json) becomes a file named by
// GOOGLE_APPLICATION_CREDENTIALS. Without a secret the mount uses the
// ambient identity: the pod's service account in sidecar mode, the plugin's
// in node mode. Values are never logged; errors name keys only.

// GCSKeyFile is the secret key holding a GCS service-account JSON key.
const GCSKeyFile = "key.json"

var (
	errBadSecret = errors.New("invalid secret")
	envName      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// reservedEnv may not come from a secret: they change how the process
// runs rather than which credentials it uses.
var reservedEnv = map[string]bool{"PATH": true, "HOME": true, "LD_PRELOAD": true, "LD_LIBRARY_PATH": true,
	"GOMEMLIMIT": true, "GOGC": true, "GODEBUG": true, "STRATA_READY_FD": true}

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
		case envName.MatchString(k) && !reservedEnv[strings.ToUpper(k)]:
			c.Env[k] = v
		default:
			return Credentials{}, fmt.Errorf("%w: key %q: want an environment variable name (AWS_ACCESS_KEY_ID, ...) or %s", errBadSecret, k, GCSKeyFile)
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
		if _, set := c.Env["GOOGLE_APPLICATION_CREDENTIALS"]; !set {
			out = append(out, "GOOGLE_APPLICATION_CREDENTIALS="+fileDir+"/"+GCSKeyFile)
		}
	}
	return out
}

// Empty reports whether no credentials were given.
func (c Credentials) Empty() bool { return len(c.Env) == 0 && len(c.Files) == 0 }
