package fakegarage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// undeclaredQuery refuses a query parameter the operation does not declare:
// Garage would ignore it, so a misspelt one would silently change the request.
func undeclaredQuery(op *openapi3.Operation, r *http.Request) error {
	for name := range r.URL.Query() {
		if op.Parameters.GetByInAndName(openapi3.ParameterInQuery, name) == nil {
			return fmt.Errorf("query parameter %q is not declared by %s", name, op.OperationID)
		}
	}
	return nil
}

func (g *Garage) validateResponse(r *http.Request, route *routers.Route, status int, header http.Header, raw []byte) error {
	if route.Operation.Responses.Status(status) == nil {
		var e garageError
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil || e.Code == "" || e.Message == "" || e.Path == "" {
			return fmt.Errorf("status %d is not in the document and the body is not Garage's error body: %s", status, raw)
		}
		return nil
	}
	return openapi3filter.ValidateResponse(r.Context(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, Route: route},
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(raw)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
}

// decodeStrict decodes a request body, refusing fields Garage's types do not
// have: the document allows them, and Garage ignores them, so a misspelt
// field would silently be dropped. Go matches field names case-insensitively,
// Garage does not, so every object's names are compared exactly first.
func decodeStrict(body []byte, v any) error {
	var generic any
	if err := json.Unmarshal(body, &generic); err != nil {
		return err
	}
	if err := exactNames(generic, reflect.TypeOf(v).Elem(), ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func exactNames(value any, t reflect.Type, at string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	obj, ok := value.(map[string]any)
	if !ok || t.Kind() != reflect.Struct {
		return nil
	}
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		fields[name] = t.Field(i).Type
	}
	for name, v := range obj {
		ft, ok := fields[name]
		if !ok {
			return fmt.Errorf("unknown field %q%s", name, at)
		}
		if err := exactNames(v, ft, " in "+name); err != nil {
			return err
		}
	}
	return nil
}

var (
	// Garage reads hexadecimal in either case (Rust's hex::decode).
	keyIDFormat  = regexp.MustCompile(`^GK[0-9a-fA-F]{24}$`)
	secretFormat = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	bucketIDForm = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	// Garage's bucket names: S3's rules, lowercase letters, digits, dots and
	// hyphens, 3 to 63 of them, starting and ending with a letter or digit.
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
)

// validBucketName is Garage's own test of a bucket name (v2.0.0,
// is_valid_bucket_name, punycode not allowed, as by default): S3's
// characters, not an IP address, no label opening with xn--, not ending in
// -s3alias. Unlike S3, Garage lets two dots stand together.
func validBucketName(name string) bool {
	return bucketName.MatchString(name) &&
		net.ParseIP(name) == nil && !strings.HasPrefix(name, "xn--") && !strings.Contains(name, ".xn--") &&
		!strings.HasSuffix(name, "-s3alias")
}
