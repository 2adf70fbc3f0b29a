package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/kvpilot/kvpilot/internal/runtime/device"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = openai.Internal("encoding the response: " + err.Error()).JSON()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func (s *Server) modelEntry() openai.Model {
	return openai.Model{ID: s.cfg.ModelName, Object: openai.ObjectModel, Created: s.created, OwnedBy: "kvpilot", MaxModelLen: s.maxModelLen,
		Architecture: s.cfg.ModelArchitecture}
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, openai.ModelList{Object: openai.ObjectList, Data: []openai.Model{s.modelEntry()}})
}

// model serves GET /v1/models/{id}.
func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, routeModels+"/")
	if name != s.cfg.ModelName {
		s.writeError(w, openai.ModelNotFound(name))
		return
	}
	writeJSON(w, http.StatusOK, s.modelEntry())
}

// health is liveness: the process serves HTTP.
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// ReadyStatus is the body of GET /ready.
type ReadyStatus struct {
	Ready   bool            `json:"ready"`
	Model   string          `json:"model"`
	Engine  EngineStatus    `json:"engine"`
	Devices []device.Device `json:"devices"`
}

// EngineStatus is the engine part of ReadyStatus.
type EngineStatus struct {
	Running         bool `json:"running"`
	RunningRequests int  `json:"running_requests"`
	WaitingRequests int  `json:"waiting_requests"`
	MaxModelLen     int  `json:"max_model_len"`
	BlockSize       int  `json:"block_size"`
	KVBlocks        int  `json:"kv_blocks"`
}

// readiness is 200 when the model is loaded and the engine runs, else 503.
func (s *Server) readiness(w http.ResponseWriter, _ *http.Request) {
	running, waiting := s.eng.Pending()
	st := ReadyStatus{
		Ready: s.Ready(),
		Model: s.cfg.ModelName,
		Engine: EngineStatus{
			Running: s.eng.Running(), RunningRequests: running, WaitingRequests: waiting,
			MaxModelLen: s.maxModelLen, BlockSize: s.eng.BlockSize(), KVBlocks: s.eng.Config().KV.NumBlocks,
		},
		Devices: s.cfg.Devices,
	}
	if st.Devices == nil {
		st.Devices = []device.Device{}
	}
	code := http.StatusOK
	if !st.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, st)
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	s.promHandler.ServeHTTP(w, r)
}
