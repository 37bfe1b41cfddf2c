package garagecatalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// GarageV2 speaks Garage's admin API v2 (Garage 2.x) over HTTP.
//
// It is written by hand: Garage publishes no maintained Go client for its
// admin API v2. Its Go SDK is a generated technical preview for API v1, not
// published in a package registry, and v1 is deprecated by Garage 2.x. The
// six calls the job makes are plain JSON over HTTP with a bearer token, as
// Garage's OpenAPI document describes them; the tests hold this client to
// that document through a double that validates every exchange.
type GarageV2 struct {
	base  string
	token string
	http  *http.Client
}

// NewGarageV2 speaks to the admin API at base (scheme://host:port) with this
// admin token. A nil client gets one with a 30 s timeout per call.
func NewGarageV2(base, token string, client *http.Client) *GarageV2 {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	return &GarageV2{base: strings.TrimRight(base, "/"), token: token, http: client}
}

// NewGarage speaks the admin API version the catalog names; a version needs
// one implementation of Garage, and this is where it is chosen.
func NewGarage(api AdminAPI, token string, client *http.Client) (Garage, error) {
	switch api.Version {
	case "v2":
		return NewGarageV2(api.URL(), token, client), nil
	default:
		return nil, fmt.Errorf("garage admin API %q is not supported (v2 is)", api.Version)
	}
}

// APIError is an answer of Garage's other than 200. Garage's error body
// names a code and a message; neither carries a secret.
type APIError struct {
	Operation string
	Status    int
	Code      string
	Message   string
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("garage %s: HTTP %d", e.Operation, e.Status)
	}
	return fmt.Sprintf("garage %s: HTTP %d %s: %s", e.Operation, e.Status, e.Code, e.Message)
}

// maxAnswerBytes bounds an answer: ListKeys of ten thousand keys is about
// 1.5 MB.
const maxAnswerBytes = 16 << 20

// call sends one request and decodes a 200 answer into out. Any other answer
// is an *APIError.
func (g *GarageV2) call(ctx context.Context, method, operation string, query url.Values, in, out any) error {
	u := g.base + "/v2/" + operation
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("garage %s: encode the request: %w", operation, err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("garage %s: %w", operation, err)
	}
	req.Header.Set("Authorization", "Bearer "+g.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return fmt.Errorf("garage %s: %w", operation, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return fmt.Errorf("garage %s: read the answer: %w", operation, err)
	}
	if len(raw) > maxAnswerBytes {
		return fmt.Errorf("garage %s: the answer is larger than %d bytes", operation, maxAnswerBytes)
	}
	if resp.StatusCode != http.StatusOK {
		apiErr := &APIError{Operation: operation, Status: resp.StatusCode}
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &e) == nil {
			apiErr.Code, apiErr.Message = e.Code, e.Message
		}
		return apiErr
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("garage %s: decode the answer: %w", operation, err)
	}
	return nil
}

func statusIs(err error, status int) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.Status == status
}

type keyInfoV2 struct {
	AccessKeyID     string  `json:"accessKeyId"`
	SecretAccessKey *string `json:"secretAccessKey"`
	Expired         bool    `json:"expired"`
}

// GetKeyInfo implements Garage.
func (g *GarageV2) GetKeyInfo(ctx context.Context, id string) (HeldKey, bool, error) {
	var info keyInfoV2
	err := g.call(ctx, http.MethodGet, "GetKeyInfo", url.Values{"id": {id}, "showSecretKey": {"true"}}, nil, &info)
	if statusIs(err, http.StatusNotFound) {
		return HeldKey{}, false, nil
	}
	if err != nil {
		return HeldKey{}, false, err
	}
	if info.AccessKeyID != id || info.SecretAccessKey == nil {
		return HeldKey{}, false, fmt.Errorf("garage GetKeyInfo: the answer for key %s lacks the key or its secret", id)
	}
	return HeldKey{Credentials: Credentials{AccessKeyID: id, SecretAccessKey: *info.SecretAccessKey}, Expired: info.Expired}, true, nil
}

// ListKeys implements Garage.
func (g *GarageV2) ListKeys(ctx context.Context) ([]KeySummary, error) {
	var items []struct {
		ID      string `json:"id"`
		Name    string `json:"name"`
		Expired bool   `json:"expired"`
	}
	if err := g.call(ctx, http.MethodGet, "ListKeys", nil, nil, &items); err != nil {
		return nil, err
	}
	keys := make([]KeySummary, len(items))
	for i, it := range items {
		keys[i] = KeySummary{ID: it.ID, Name: it.Name, Expired: it.Expired}
	}
	return keys, nil
}

// ImportKey implements Garage.
func (g *GarageV2) ImportKey(ctx context.Context, name string, key Credentials) error {
	req := struct {
		AccessKeyID     string `json:"accessKeyId"`
		SecretAccessKey string `json:"secretAccessKey"`
		Name            string `json:"name"`
	}{key.AccessKeyID, key.SecretAccessKey, name}
	err := g.call(ctx, http.MethodPost, "ImportKey", nil, req, nil)
	if statusIs(err, http.StatusConflict) {
		return fmt.Errorf("garage ImportKey %s: %w", key.AccessKeyID, ErrExists)
	}
	return err
}

type bucketInfoV2 struct {
	ID   string `json:"id"`
	Keys []struct {
		AccessKeyID string `json:"accessKeyId"`
		Permissions struct {
			Read  bool `json:"read"`
			Write bool `json:"write"`
			Owner bool `json:"owner"`
		} `json:"permissions"`
	} `json:"keys"`
}

func (b bucketInfoV2) bucket() Bucket {
	out := Bucket{ID: b.ID, Perms: make(map[string]Permission, len(b.Keys))}
	for _, k := range b.Keys {
		out.Perms[k.AccessKeyID] = Permission{Read: k.Permissions.Read, Write: k.Permissions.Write, Owner: k.Permissions.Owner}
	}
	return out
}

// GetBucketInfo implements Garage.
func (g *GarageV2) GetBucketInfo(ctx context.Context, alias string) (Bucket, bool, error) {
	var info bucketInfoV2
	err := g.call(ctx, http.MethodGet, "GetBucketInfo", url.Values{"globalAlias": {alias}}, nil, &info)
	if statusIs(err, http.StatusNotFound) {
		return Bucket{}, false, nil
	}
	if err != nil {
		return Bucket{}, false, err
	}
	return info.bucket(), true, nil
}

// CreateBucket implements Garage.
func (g *GarageV2) CreateBucket(ctx context.Context, alias string) (Bucket, error) {
	var info bucketInfoV2
	err := g.call(ctx, http.MethodPost, "CreateBucket", nil, struct {
		GlobalAlias string `json:"globalAlias"`
	}{alias}, &info)
	if statusIs(err, http.StatusConflict) {
		return Bucket{}, fmt.Errorf("garage CreateBucket %s: %w", alias, ErrExists)
	}
	if err != nil {
		return Bucket{}, err
	}
	return info.bucket(), nil
}

// AllowBucketKey implements Garage. Garage turns on the flags sent true and
// leaves the others as they are, so a false never takes a grant away.
func (g *GarageV2) AllowBucketKey(ctx context.Context, bucketID, keyID string, perm Permission) error {
	type perms struct {
		Read  bool `json:"read"`
		Write bool `json:"write"`
		Owner bool `json:"owner"`
	}
	req := struct {
		BucketID    string `json:"bucketId"`
		AccessKeyID string `json:"accessKeyId"`
		Permissions perms  `json:"permissions"`
	}{bucketID, keyID, perms(perm)}
	return g.call(ctx, http.MethodPost, "AllowBucketKey", nil, req, nil)
}
