package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/stratafs/strata/internal/config"
)

// mount(8) runs /sbin/mount.<type> for a filesystem type it does not know:
// an fstab line
//
//	s3://bucket/prefix  /mnt/data  fuse.strata  _netdev,allow_other,cache_dir=/nvme/strata,metadata_ttl=indefinite  0 0
//
// runs `mount.fuse.strata s3://bucket/prefix /mnt/data -o _netdev,...`
// (`mount -t strata` runs mount.strata). Both are symlinks to the strata
// binary, which sees its name in argv[0] and turns the call into
// `strata mount SOURCE DIR --flags`: every -o option name=value is the
// flag --name value (underscores become dashes), a bare name a boolean
// flag; mount(8)'s generic options are ignored; rw and ro map to
// --read-only.

// helperNames are the argv[0] base names that mean "called by mount(8)".
var helperNames = map[string]bool{"mount.strata": true, "mount.fuse.strata": true}

// genericOptions are mount(8) and fstab options that mean nothing to
// strata (or that mount(8) handles itself).
var genericOptions = map[string]bool{
	"defaults": true, "_netdev": true, "nofail": true, "auto": true, "noauto": true,
	"user": true, "users": true, "nouser": true, "owner": true, "group": true,
	"suid": true, "nosuid": true, "dev": true, "nodev": true, "exec": true, "noexec": true,
	"atime": true, "noatime": true, "relatime": true, "norelatime": true, "strictatime": true,
	"diratime": true, "nodiratime": true, "lazytime": true, "nolazytime": true,
	"sync": true, "async": true, "dirsync": true, "silent": true, "loud": true,
	"nosymfollow": true, "iversion": true, "noiversion": true, "mand": true, "nomand": true,
	"fsname": true, "subtype": true, "comment": true,
}

// asMountHelper rewrites argv when the binary runs as a mount helper, and
// returns it unchanged otherwise. Bad options end the process with
// mount(8)'s usage status.
func asMountHelper(argv []string) []string {
	if len(argv) == 0 || !helperNames[filepath.Base(argv[0])] {
		return argv
	}
	out, fake, err := helperArgs(argv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(argv[0]), err)
		os.Exit(1) // mount(8): incorrect invocation
	}
	if fake {
		os.Exit(0) // -f: do everything but the mount
	}
	return out
}

// helperArgs parses `mount.strata SOURCE DIR [-sfnv] [-N ns] [-o opts] [-t type]`.
func helperArgs(argv []string) (out []string, fake bool, err error) {
	var pos, opts []string
	args := argv[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "-t" || a == "-N":
			if i+1 >= len(args) {
				return nil, false, fmt.Errorf("%s needs a value", a)
			}
			if a == "-o" {
				opts = append(opts, args[i+1])
			}
			i++
		case strings.HasPrefix(a, "-o"):
			opts = append(opts, a[2:])
		case strings.HasPrefix(a, "-t") || strings.HasPrefix(a, "-N"):
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for _, c := range a[1:] {
				switch c {
				case 'f':
					fake = true
				case 's', 'n', 'v', 'r', 'w':
				default:
					return nil, false, fmt.Errorf("unknown option -%c", c)
				}
			}
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return nil, false, errors.New("usage: mount.strata SOURCE MOUNTPOINT [-o options]")
	}
	flags, err := optionFlags(strings.Join(opts, ","))
	if err != nil {
		return nil, false, err
	}
	return append([]string{argv[0], "mount", pos[0], pos[1]}, flags...), fake, nil
}

// optionFlags turns a -o list into mount flags.
func optionFlags(opts string) ([]string, error) {
	known := pflag.NewFlagSet("mount", pflag.ContinueOnError)
	cfg := config.Defaults()
	bindMountFlags(known, &cfg)
	var out []string
	for _, o := range strings.Split(opts, ",") {
		o = strings.TrimSpace(o)
		name, value, hasValue := strings.Cut(o, "=")
		switch {
		case o == "":
			continue
		case genericOptions[name] || strings.HasPrefix(name, "x-"):
			continue
		case o == "rw":
			out = append(out, "--read-only=false")
			continue
		case o == "ro":
			out = append(out, "--read-only")
			continue
		case o == "nonempty" || o == "allow_nonempty" || o == "allow-nonempty":
			out = append(out, "--allow-nonempty") // a mount flag only (mount.go)
			continue
		}
		flag := strings.ReplaceAll(name, "_", "-")
		f := known.Lookup(flag)
		if f == nil || flag == "print-config" || flag == "help" {
			return nil, fmt.Errorf("unknown option %q (options are the flags of `strata mount --help`, with _ or -)", name)
		}
		switch {
		case hasValue:
			out = append(out, "--"+flag+"="+value)
		case f.Value.Type() == "bool":
			out = append(out, "--"+flag)
		default:
			return nil, fmt.Errorf("option %q needs a value (%s=...)", name, name)
		}
	}
	return out, nil
}
