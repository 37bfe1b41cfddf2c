package garagecatalog

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"
)

// VaultKV is the Vault the run reads and writes, through Vault's own client.
type VaultKV struct {
	Client *vaultapi.Client
}

// ReadDocument implements Vault. A path whose current version is deleted or
// destroyed is an error, not an absent document: its check-and-set version
// is taken, so nothing can be written there until someone decides what the
// deleted version was.
func (v *VaultKV) ReadDocument(ctx context.Context, path string) (map[string]any, bool, error) {
	secret, err := v.Client.Logical().ReadWithContext(ctx, path)
	if err != nil {
		return nil, false, fmt.Errorf("vault read %s: %w", path, err)
	}
	if secret == nil {
		return nil, false, nil
	}
	data, _ := secret.Data["data"].(map[string]any)
	if data == nil {
		return nil, false, fmt.Errorf("vault read %s: its current version is deleted or destroyed; undelete it, or remove its metadata, before the next run", path)
	}
	return data, true, nil
}

// CreateDocument implements Vault with check-and-set 0: Vault writes only
// where the path holds no version. It works under a policy granting update
// too, where check-and-set alone guards the document, and under one granting
// only create, where Vault's policy guards it as well.
func (v *VaultKV) CreateDocument(ctx context.Context, path string, fields map[string]string) (bool, error) {
	_, err := v.Client.Logical().WriteWithContext(ctx, path, map[string]any{
		"options": map[string]any{"cas": 0},
		"data":    fields,
	})
	if err == nil {
		return true, nil
	}
	var re *vaultapi.ResponseError
	if errors.As(err, &re) {
		switch {
		case re.StatusCode == http.StatusBadRequest && strings.Contains(strings.Join(re.Errors, " "), "check-and-set"):
			return false, nil
		case re.StatusCode == http.StatusForbidden:
			// A policy granting create but not update, as the job needs, has
			// Vault refuse a write where a version exists before check-and-set
			// is looked at: the refusal is a lost race when a document is there.
			if _, found, readErr := v.ReadDocument(ctx, path); readErr == nil && found {
				return false, nil
			}
		}
	}
	return false, fmt.Errorf("vault write %s: %w", path, err)
}

// ReadAdminToken reads Garage's admin token from the document and field the
// catalog names.
func ReadAdminToken(ctx context.Context, v Vault, t AdminToken) (string, error) {
	fields, found, err := v.ReadDocument(ctx, t.Path)
	if err != nil {
		return "", err
	}
	if !found {
		return "", fmt.Errorf("vault holds no document at %s for Garage's admin token", t.Path)
	}
	token, _ := fields[t.Field].(string)
	if strings.TrimSpace(token) == "" {
		return "", fmt.Errorf("vault document %s has no field %s holding Garage's admin token", t.Path, t.Field)
	}
	return token, nil
}
