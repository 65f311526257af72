package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"sort"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/stratafs/strata/internal/config"
)

// A config file (--config FILE) is YAML whose keys are the flag names:
//
//	cache-dir: /nvme/strata
//	cache-size: 500GiB
//	metadata-ttl: indefinite
//	endpoint-url: https://minio.internal:9000
//
// Precedence: defaults < config file < command-line flags. Values go
// through the flags' own parsers, so a file accepts exactly what the
// command line does and every error names the file and line.

var errConfigFile = errors.New("config file")

// notInFile are flags a config file may not set.
var notInFile = map[string]bool{"config": true, "print-config": true, "help": true}

// applyConfigFile applies --config (if given) to every flag not set on
// the command line. It returns where the file's keys ended up: "config
// file", or "flag (overrides the config file)".
func applyConfigFile(fs *pflag.FlagSet) (map[string]string, error) {
	f := fs.Lookup("config")
	if f == nil || f.Value.String() == "" {
		return nil, nil
	}
	path := f.Value.String()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfigFile, err)
	}
	return applyConfig(fs, path, b)
}

func applyConfig(fs *pflag.FlagSet, path string, b []byte) (map[string]string, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // empty file
		}
		return nil, fmt.Errorf("%w %s: %w", errConfigFile, path, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w %s:%d: want a mapping of flag names to values", errConfigFile, path, m.Line)
	}
	set := map[string]string{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		name := k.Value
		at := fmt.Sprintf("%s:%d", path, k.Line)
		fl := fs.Lookup(name)
		switch {
		case fl == nil || notInFile[name]:
			return nil, fmt.Errorf("%w %s: unknown key %q (the keys are the flag names of `strata mount --help`)", errConfigFile, at, name)
		case set[name] != "":
			return nil, fmt.Errorf("%w %s: %q given twice", errConfigFile, at, name)
		case v.Kind != yaml.ScalarNode || v.Tag == "!!null":
			return nil, fmt.Errorf("%w %s: %s: want a single value", errConfigFile, at, name)
		}
		if fl.Changed {
			set[name] = "flag (overrides the config file)"
			continue // the command line wins
		}
		set[name] = "config file"
		if err := fl.Value.Set(v.Value); err != nil {
			return nil, fmt.Errorf("%w %s: %s: %w", errConfigFile, at, name, err)
		}
		fl.Changed = true
	}
	return set, nil
}

// withConfig gives a command --config and --print-config: the file is
// applied before the command runs, and --print-config prints the
// effective settings instead of running it, once check (what the
// command would refuse before doing anything) passes: a setting printed
// as effective is one the command runs with.
func withConfig(cmd *cobra.Command, check func(args []string) error) *cobra.Command {
	args, run := cmd.Args, cmd.RunE
	cmd.Args = func(c *cobra.Command, a []string) error {
		if pc, _ := c.Flags().GetBool("print-config"); pc {
			return cobra.RangeArgs(0, 2)(c, a)
		}
		return args(c, a)
	}
	cmd.RunE = func(c *cobra.Command, a []string) error {
		fromFile, err := applyConfigFile(c.Flags())
		if err != nil {
			return err
		}
		if pc, _ := c.Flags().GetBool("print-config"); pc {
			if err := check(a); err != nil {
				return err
			}
			return printConfig(c.OutOrStdout(), c.Flags(), fromFile, a)
		}
		return run(c, a)
	}
	return cmd
}

// secretKey matches flag names whose values must never be shown.
var secretKey = regexp.MustCompile(`(?i)(secret|password|passwd|token|credential|access-key|private|session-key)`)

// redact hides a secret value, and the password of a URL's userinfo.
func redact(name, value string) string {
	if value == "" {
		return value
	}
	if secretKey.MatchString(name) {
		return "<redacted>"
	}
	if u, err := url.Parse(value); err == nil && u.User != nil && u.Scheme != "" {
		return u.Redacted()
	}
	return value
}

// printConfig writes the effective configuration as a config file would
// hold it, each value annotated with where it came from.
func printConfig(w io.Writer, fs *pflag.FlagSet, fromFile map[string]string, args []string) error {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !notInFile[f.Name] && !f.Hidden {
			names = append(names, f.Name)
		}
	})
	sort.Strings(names)
	root := &yaml.Node{Kind: yaml.MappingNode}
	derivedCacheDir := ""
	if len(args) > 0 {
		if src, err := config.ParseSource(args[0]); err == nil && fs.Lookup("cache-dir").Value.String() == "" {
			ep := ""
			if f := fs.Lookup("endpoint-url"); f != nil {
				ep = f.Value.String()
			}
			derivedCacheDir, _ = config.DefaultCacheDir(src, ep)
		}
	}
	for _, name := range names {
		f := fs.Lookup(name)
		v, origin := f.Value.String(), "default"
		switch {
		case fromFile[name] != "":
			origin = fromFile[name]
		case f.Changed:
			origin = "flag"
		}
		if name == "cache-dir" && v == "" && derivedCacheDir != "" {
			v, origin = derivedCacheDir, "derived from the source"
		}
		val := &yaml.Node{Kind: yaml.ScalarNode, Value: redact(name, v), LineComment: origin}
		if f.Value.Type() == "string" {
			val.Style = yaml.DoubleQuotedStyle
		}
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, val)
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}
	doc.HeadComment = "strata " + config.Version + " effective configuration"
	if len(args) == 2 {
		doc.HeadComment += fmt.Sprintf("\nstrata mount %s %s", args[0], args[1])
	}
	if f := fs.Lookup("config"); f != nil && f.Value.String() != "" {
		doc.HeadComment += "\nconfig file: " + f.Value.String() + " (flags win over it)"
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return enc.Close()
}
