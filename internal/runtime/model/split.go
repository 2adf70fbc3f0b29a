package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Split GGUFs: llama.cpp's gguf-split cuts a model into parts named
// <prefix>-00001-of-00003.gguf …, each a whole GGUF file with its own
// header and tensor infos (offsets relative to its own data), the first
// holding all of the model's metadata. Every part carries split.no (its
// index from 0) and split.count as uint16 and split.tensors.count, the
// model's tensors over all parts, as int32. Large models are published so
// (Hugging Face caps a file at 50 GB). The loader maps every part and
// reads them as one file: the first part's metadata, every part's tensors.

// GGUF keys of a split model's parts (llama.cpp's LLM_KV_SPLIT_*).
const (
	keySplitNo      = "split.no"
	keySplitCount   = "split.count"
	keySplitTensors = "split.tensors.count"
)

// maxSplitParts bounds split.count: five digits in the parts' names.
const maxSplitParts = 99999

// SplitPath is the name of part no (from 0) of count of the split model
// prefix: "<prefix>-%05d-of-%05d.gguf", numbered from 1, as llama.cpp's
// llama_split_path writes it.
func SplitPath(prefix string, no, count int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, no+1, count)
}

// splitPrefix is path's prefix as part no of count (SplitPath's inverse);
// ok is false when path is not so named.
func splitPrefix(path string, no, count int) (prefix string, ok bool) {
	prefix, ok = strings.CutSuffix(path, SplitPath("", no, count))
	return prefix, ok && prefix != ""
}

// splitPart reads a file's place in a split model: part 0 of 1 for a file
// that is not split.
func (f *ggufFile) splitPart() (no, count int, err error) {
	c, ok, err := f.uint(keySplitCount)
	if err != nil || !ok || c <= 1 {
		return 0, 1, err
	}
	if c > maxSplitParts {
		return 0, 0, fmt.Errorf("%s %d: more than %d parts", keySplitCount, c, maxSplitParts)
	}
	n, ok, err := f.uint(keySplitNo)
	switch {
	case err != nil:
		return 0, 0, err
	case !ok:
		return 0, 0, fmt.Errorf("%s %d without %s", keySplitCount, c, keySplitNo)
	case n >= c:
		return 0, 0, fmt.Errorf("%s %d of %s %d", keySplitNo, n, keySplitCount, c)
	}
	return int(n), int(c), nil
}

// mappedGGUF is a GGUF file, or every part of a split one, mapped and
// parsed; unmap releases the mappings.
type mappedGGUF struct {
	f     *ggufFile
	unmap func() error
}

// openGGUF maps and parses the file at path. When it is a part of a split
// model (any part: the others are found by name), it maps every part and
// returns them as one file: the first part's metadata and the tensors of
// all parts, each aliasing its own part's mapping.
func openGGUF(path string) (mappedGGUF, error) {
	data, unmap, err := mapGGUF(path)
	if err != nil {
		return mappedGGUF{}, err
	}
	f, err := parseGGUF(data)
	if err == nil {
		var no, count int
		if no, count, err = f.splitPart(); err == nil && count > 1 {
			return openSplit(path, no, count, mappedGGUF{f, unmap})
		}
	}
	if err != nil {
		_ = unmap()
		return mappedGGUF{}, err
	}
	return mappedGGUF{f, unmap}, nil
}

// openSplit maps the other parts of the split model whose part no of count
// is given (at path, mapped and parsed) and joins them. The parts must all
// be there, each saying it is its part of count, and hold between them
// split.tensors.count tensors, none twice.
func openSplit(path string, no, count int, given mappedGGUF) (mappedGGUF, error) {
	parts := make([]mappedGGUF, count)
	parts[no] = given
	unmapAll := func() error {
		var errs []error
		for _, p := range parts {
			if p.unmap != nil {
				errs = append(errs, p.unmap())
			}
		}
		return errors.Join(errs...)
	}
	joined, err := joinSplit(path, no, count, parts)
	if err != nil {
		_ = unmapAll()
		return mappedGGUF{}, fmt.Errorf("split model (part %d of %d): %w", no+1, count, err)
	}
	return mappedGGUF{joined, unmapAll}, nil
}

// partsPrefix is the prefix the parts of the split model whose part no of
// count is at path go by: path's own (splitPrefix), or, when path is a
// symlink not so named, that of the link it points to, link by link (a
// fetched model's model.gguf links to its first part's name, which links
// to a blob: internal/runtime/fetch).
func partsPrefix(path string, no, count int) (string, bool) {
	for range 8 {
		if prefix, ok := splitPrefix(path, no, count); ok {
			return prefix, true
		}
		target, err := os.Readlink(path)
		if err != nil {
			return "", false
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	return "", false
}

// joinSplit fills parts (part no is given) and joins them into one file.
func joinSplit(path string, no, count int, parts []mappedGGUF) (*ggufFile, error) {
	prefix, ok := partsPrefix(path, no, count)
	if !ok {
		return nil, fmt.Errorf("the file is not named as a part (…%s), so its other parts cannot be found", SplitPath("", no, count))
	}
	for i := range parts {
		if parts[i].f != nil {
			continue
		}
		p := SplitPath(prefix, i, count)
		data, unmap, err := mapGGUF(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("part %d of %d, %s, is missing", i+1, count, p)
		}
		if err != nil {
			return nil, fmt.Errorf("part %s: %w", p, err)
		}
		parts[i].unmap = unmap
		if parts[i].f, err = parseGGUF(data); err != nil {
			return nil, fmt.Errorf("part %s: %w", p, err)
		}
		n, c, err := parts[i].f.splitPart()
		if err != nil {
			return nil, fmt.Errorf("part %s: %w", p, err)
		}
		if n != i || c != count {
			return nil, fmt.Errorf("part %s says it is part %d of %d, want %d of %d", p, n+1, c, i+1, count)
		}
	}
	first := parts[0].f
	joined := &ggufFile{version: first.version, kv: first.kv, alignment: first.alignment}
	seen := map[string]int{}
	for i, p := range parts {
		for _, t := range p.f.tensors {
			if j, dup := seen[t.name]; dup {
				return nil, fmt.Errorf("tensor %q is in part %d and in part %d", t.name, j+1, i+1)
			}
			seen[t.name] = i
			joined.tensors = append(joined.tensors, t)
		}
	}
	want, ok, err := first.uint(keySplitTensors)
	switch {
	case err != nil:
		return nil, err
	case ok && want != uint64(len(joined.tensors)):
		return nil, fmt.Errorf("the parts hold %d tensors, %s says %d", len(joined.tensors), keySplitTensors, want)
	}
	return joined, nil
}

// WriteSplitGGUF writes m as llama.cpp's gguf-split --split-max-tensors
// does: parts of at most maxTensors tensors each, in WriteGGUF's order,
// named SplitPath(prefix, i, parts), the first with all of WriteGGUF's
// metadata, every one with the split keys. The parts are written to
// temporary files beside them and renamed into place once all are
// written, so a failed write leaves none behind. It returns their paths.
func WriteSplitGGUF(prefix string, m *Model, maxTensors int) ([]string, error) {
	paths, err := writeSplit(prefix, m, maxTensors)
	if err != nil {
		return nil, fmt.Errorf("write split gguf %s: %w", prefix, err)
	}
	return paths, nil
}

func writeSplit(prefix string, m *Model, maxTensors int) ([]string, error) {
	if maxTensors <= 0 {
		return nil, fmt.Errorf("at most %d tensors a part: want at least 1", maxTensors)
	}
	kvs, err := ggufMetadata(m)
	if err != nil {
		return nil, err
	}
	tensors := m.Weights.Tensors()
	count := max(1, (len(tensors)+maxTensors-1)/maxTensors)
	if count > maxSplitParts {
		return nil, fmt.Errorf("%d tensors in parts of %d: more than %d parts", len(tensors), maxTensors, maxSplitParts)
	}
	var temps []string
	defer func() {
		for _, t := range temps {
			_ = os.Remove(t)
		}
	}()
	paths := make([]string, count)
	for i := range count {
		part := []ggufKV{{keySplitNo, uint16(i)}, {keySplitCount, uint16(count)}, {keySplitTensors, int32(len(tensors))}}
		if i == 0 {
			part = append(kvs, part...)
		}
		paths[i] = SplitPath(prefix, i, count)
		f, err := os.CreateTemp(filepath.Dir(paths[i]), ".kvpilot-split-*")
		if err != nil {
			return nil, err
		}
		temps = append(temps, f.Name())
		err = writeGGUF(f, part, tensors[min(i*maxTensors, len(tensors)):min((i+1)*maxTensors, len(tensors))])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("part %s: %w", paths[i], err)
		}
	}
	for i, t := range temps {
		if err := os.Rename(t, paths[i]); err != nil {
			return nil, err
		}
	}
	temps = nil
	return paths, nil
}
