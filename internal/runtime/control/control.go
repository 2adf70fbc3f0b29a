// Package control is the runtime pod's control API, served on its own port
// for the controller: GET /v1/state returns the pod's KV capacity and
// program table; PUT /v1/placement applies a versioned placement. Both need
// the pool's bearer token (from the Secret the controller creates per pool).
// Its callers use package controlclient, which does not link the pod's
// code.
package control

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/kvpilot/kvpilot/internal/runtime/control/wire"
	"github.com/kvpilot/kvpilot/internal/runtime/programs"
)

// maxBody bounds a placement's JSON.
const maxBody = 8 << 20

// Handler serves the control API over a program table, every endpoint
// behind Authorize(token).
func Handler(t *programs.Table, token string) http.Handler {
	return Authorize(token, Routes(t))
}

// Routes are the control API's endpoints over a program table, without
// authentication: a caller that adds endpoints to the control port adds
// them here and serves the whole behind Authorize (Handler does both).
func Routes(t *programs.Table) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+wire.StatePath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, t.Report())
	})
	mux.HandleFunc("PUT "+wire.PlacementPath, func(w http.ResponseWriter, r *http.Request) {
		var p wire.Placement
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		dec.DisallowUnknownFields()
		err := dec.Decode(&p)
		if err == nil {
			// One JSON object and nothing after it: trailing bytes mean a
			// sender out of step with this API, not a placement to trust.
			if _, terr := dec.Token(); terr != io.EOF {
				err = errors.New("unexpected data after the JSON object")
			}
		}
		if err != nil {
			status := http.StatusBadRequest
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				status = http.StatusRequestEntityTooLarge
			}
			writeJSON(w, status, map[string]string{"error": "placement: " + err.Error()})
			return
		}
		res, err := Apply(t, &p)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "placement refused: " + err.Error(), "field": refusedField(err)})
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	return mux
}

// Apply applies placement p to the pod's program table t, as PUT
// /v1/placement does (the in-process client of the simulator of agent
// pools calls it too): ValidatePlacement, then Table.ApplyPlacement. A
// refused placement changes nothing; its error is a *FieldError or a
// *programs.LimitError, naming the field.
func Apply(t *programs.Table, p *wire.Placement) (*wire.PlacementResult, error) {
	if err := ValidatePlacement(p); err != nil {
		return nil, err
	}
	applied, err := t.ApplyPlacement(p)
	if err != nil {
		return nil, err
	}
	return &wire.PlacementResult{Version: t.Version(), Applied: applied}, nil
}

// refusedField is the placement field an Apply error names, "" if none.
func refusedField(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	var le *programs.LimitError
	if errors.As(err, &le) {
		return le.Field
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
