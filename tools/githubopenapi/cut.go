package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// methods are the keys of an OpenAPI path item that hold operations; the
// item's other keys (parameters, summary, servers) apply to all of them.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// Cut returns the part of the OpenAPI document full that holds the operations
// named, and every component they reach through a $ref, however deep. The
// document's head (openapi, info, servers, externalDocs) is kept as it is,
// its tags only where a kept operation names them; everything else (other
// paths, webhooks, unreached components) is left out. The same input gives
// the same bytes: keys are written sorted, two spaces deep.
func Cut(full []byte, operations []string) ([]byte, error) {
	if len(operations) == 0 {
		return nil, errors.New("no operation named: the cut would be empty")
	}
	want := map[string]bool{}
	for _, id := range operations {
		if want[id] {
			return nil, fmt.Errorf("operation %q is named twice", id)
		}
		want[id] = true
	}
	doc, err := decodeObject(full)
	if err != nil {
		return nil, err
	}
	if v, ok := doc["openapi"].(string); !ok || !strings.HasPrefix(v, "3.") {
		return nil, errors.New(`the document is not OpenAPI 3: its "openapi" field is missing or not 3.x`)
	}
	paths, ok := doc["paths"].(map[string]any)
	if !ok {
		return nil, errors.New(`the document has no "paths" object`)
	}

	keptPaths := map[string]any{}
	found := map[string]bool{}
	tags := map[string]bool{}
	for template, raw := range paths {
		item, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("path %s is not an object", template)
		}
		kept := map[string]any{}
		for _, m := range methods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			id, _ := op["operationId"].(string)
			if !want[id] {
				continue
			}
			if found[id] {
				return nil, fmt.Errorf("operation %q appears twice in the document", id)
			}
			found[id] = true
			kept[m] = op
			if names, ok := op["tags"].([]any); ok {
				for _, n := range names {
					if s, ok := n.(string); ok {
						tags[s] = true
					}
				}
			}
		}
		if len(kept) == 0 {
			continue
		}
		for k, v := range item {
			if !slices.Contains(methods, k) {
				kept[k] = v
			}
		}
		keptPaths[template] = kept
	}
	var missing []string
	for _, id := range operations {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the document has no operation %s", strings.Join(missing, ", "))
	}

	components, err := reach(doc, keptPaths)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"paths": keptPaths}
	for _, k := range []string{"openapi", "info", "servers", "externalDocs"} {
		if v, ok := doc[k]; ok {
			out[k] = v
		}
	}
	if len(components) > 0 {
		out["components"] = components
	}
	if all, ok := doc["tags"].([]any); ok {
		var keptTags []any
		for _, t := range all {
			if tag, ok := t.(map[string]any); ok && tags[fmt.Sprint(tag["name"])] {
				keptTags = append(keptTags, tag)
			}
		}
		if keptTags != nil {
			out["tags"] = keptTags
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeObject reads one JSON object, keeping numbers as they are written so
// the cut does not round them.
func decodeObject(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("the document is not a JSON object: %w", err)
	}
	if doc == nil {
		return nil, errors.New("the document is not a JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("the document has more than one JSON value")
	}
	return doc, nil
}

// reach follows every $ref from start through the document's components until
// no new one turns up, and returns the components reached, by kind and name.
// Only references within the document, to a component or inside one, are
// followed; any other is an error, as the cut could not carry it.
func reach(doc map[string]any, start any) (map[string]any, error) {
	all, _ := doc["components"].(map[string]any)
	out := map[string]any{}
	seen := map[string]bool{}
	queue := refs(start, nil)
	for len(queue) > 0 {
		ref := queue[0]
		queue = queue[1:]
		kind, name, err := component(ref)
		if err != nil {
			return nil, err
		}
		key := kind + "/" + name
		if seen[key] {
			continue
		}
		seen[key] = true
		byKind, _ := all[kind].(map[string]any)
		value, ok := byKind[name]
		if !ok {
			return nil, fmt.Errorf("$ref %s names no component in the document", ref)
		}
		if _, err := resolve(doc, ref); err != nil {
			return nil, err
		}
		if out[kind] == nil {
			out[kind] = map[string]any{}
		}
		out[kind].(map[string]any)[name] = value
		queue = refs(value, queue)
	}
	return out, nil
}

// refs appends every $ref string under v to acc, in a stable order.
func refs(v any, acc []string) []string {
	switch v := v.(type) {
	case map[string]any:
		if r, ok := v["$ref"].(string); ok {
			acc = append(acc, r)
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			acc = refs(v[k], acc)
		}
	case []any:
		for _, e := range v {
			acc = refs(e, acc)
		}
	}
	return acc
}

// component splits a reference such as #/components/schemas/simple-user (or a
// place inside that component) into its kind and name.
func component(ref string) (kind, name string, err error) {
	tokens, err := pointer(ref)
	if err != nil {
		return "", "", err
	}
	if len(tokens) < 3 || tokens[0] != "components" {
		return "", "", fmt.Errorf("$ref %s does not name a component: the cut carries only components", ref)
	}
	return tokens[1], tokens[2], nil
}

// pointer decodes a local reference's JSON pointer (RFC 6901) into its tokens.
func pointer(ref string) ([]string, error) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("$ref %q is not within the document", ref)
	}
	tokens := strings.Split(rest, "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// resolve finds what a local reference points at, so a reference into a
// component that does not exist is caught at the cut, not by its reader.
func resolve(doc map[string]any, ref string) (any, error) {
	tokens, err := pointer(ref)
	if err != nil {
		return nil, err
	}
	var at any = doc
	for _, t := range tokens {
		switch v := at.(type) {
		case map[string]any:
			next, ok := v[t]
			if !ok {
				return nil, fmt.Errorf("$ref %s points at nothing", ref)
			}
			at = next
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(v) {
				return nil, fmt.Errorf("$ref %s points at nothing", ref)
			}
			at = v[i]
		default:
			return nil, fmt.Errorf("$ref %s points into a value that is neither an object nor an array", ref)
		}
	}
	return at, nil
}

// ParseOperations reads a list of operation ids, one a line; blank lines and
// lines starting with # are skipped.
func ParseOperations(text string) []string {
	var ids []string
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ids = append(ids, line)
	}
	return ids
}
