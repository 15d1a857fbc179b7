package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// Sections are the tiers' own configuration sections, by tier name, as the file has them. The
// package of each tier owns its section's type, defaults and checks, and reads it with Decode;
// this package keeps the bytes, so adding a tier adds no field here.
type Sections map[string]json.RawMessage

// Decode reads the section of tier name into v, which holds the tier's defaults: the fields the
// file sets replace them. A field the tier does not have is an error, as in the rest of the file.
func (s Sections) Decode(name string, v any) error {
	raw, ok := s[name]
	if !ok {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("config: %s: %w", name, err)
	}
	return nil
}

// Set replaces the section of tier name with v, for the code and tests that build a configuration
// in Go rather than in a file.
func (s *Sections) Set(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("config: %s: %w", name, err)
	}
	if *s == nil {
		*s = Sections{}
	}
	(*s)[name] = b
	return nil
}

// Check reports a section that names no tier of this build: a typo would otherwise be ignored.
func (s Sections) Check(tiers []string) error {
	var unknown []string
	for name := range s {
		if !slices.Contains(tiers, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return fmt.Errorf("config: unknown setting %q (neither a setting nor a tier of this build: %s)", unknown[0], strings.Join(tiers, ", "))
}

// decode reads a configuration file over c: the settings this package knows strictly (an unknown
// field inside one is an error), every other top-level key into Tiers for the tiers to read.
func (c *Config) decode(b []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return err
	}
	own := map[string]json.RawMessage{}
	known := ownKeys()
	for k, v := range top {
		if known[k] {
			own[k] = v
			continue
		}
		if c.Tiers == nil {
			c.Tiers = Sections{}
		}
		c.Tiers[k] = v
	}
	rest, err := json.Marshal(own)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	return dec.Decode(c)
}

// ownKeys are the JSON names of Config's own fields.
func ownKeys() map[string]bool {
	keys := map[string]bool{}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys[name] = true
		}
	}
	return keys
}
