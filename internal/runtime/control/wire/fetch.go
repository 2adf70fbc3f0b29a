package wire

// FetchProgressPath is where a pod's fetch-model init container answers
// GET with its FetchProgress, on the pod's control port, while it runs
// (the runtime's control API takes the port over once it starts). The
// controller folds it into the pool's ModelReady condition.
const FetchProgressPath = "/v1/fetch"

// The phases of a fetch (FetchProgress.Phase).
const (
	// FetchResolving: asking the store for the model's files.
	FetchResolving = "resolving"
	// FetchWaiting: another fetcher of the same URL on the shared cache
	// holds its lock; this one uses its result.
	FetchWaiting = "waiting"
	// FetchDownloading: bytes are arriving.
	FetchDownloading = "downloading"
	// FetchDone: the model is in the cache.
	FetchDone = "done"
)

// FetchProgress is a model download's state.
type FetchProgress struct {
	// Phase is one of FetchResolving, FetchWaiting, FetchDownloading and
	// FetchDone.
	Phase string `json:"phase"`
	// File is the number of the file being downloaded, from 1, of Files
	// (a split model's parts; 0 before the files are known).
	File  int `json:"file,omitempty"`
	Files int `json:"files,omitempty"`
	// DoneBytes are the model's bytes in the cache so far, of all files.
	DoneBytes int64 `json:"doneBytes"`
	// TotalBytes is the model's size, -1 while the store has not said.
	TotalBytes int64 `json:"totalBytes"`
}
