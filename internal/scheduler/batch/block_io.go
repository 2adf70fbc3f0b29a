package batch

import (
	"fmt"

	"github.com/kvpilot/kvpilot/internal/scheduler/kvcache"
)

// BlockIO is implemented by executors whose KV block contents can be read
// out as bytes and written back in: the engine moves a paused program's KV
// to another pod with it (engine.ExportChain, engine.ImportChain).
//
// Contract:
//   - BlockFormat describes the bytes. Two pods exchange blocks only when
//     their formats are equal (BlockFormat.Compatible); the engine checks,
//     the executor need not.
//   - A block's bytes are, layer by layer, its keys and then its values,
//     each BlockSize token rows of the cache's type (kvcache.DType),
//     little endian: Geometry.BytesPerBlock(BlockSize) in all. Every
//     executor with contents uses this layout, whatever its own memory
//     holds, so the bytes mean the same on every pod of one format.
//   - ReadBlock fills dst (len BlockBytes) with the contents at p, a device
//     block or a host-tier slot; WriteBlock overwrites them with src. Both
//     are synchronous: the bytes have landed when they return.
//   - The engine owns every block and slot; it calls ReadBlock and
//     WriteBlock only between iterations, with every transfer between the
//     tiers landed, never concurrently with Execute, CopyBlocks or each
//     other. An error from WriteBlock means the block holds nothing usable
//     (the engine forgets it, kvcache.Manager.DropImported).
//   - An executor without contents (the sim) reports a format with
//     Contents false: BlockBytes is 0 and both calls move nothing; what it
//     models of a transfer is its time (see the sim executor).
type BlockIO interface {
	BlockFormat() BlockFormat
	ReadBlock(p kvcache.Place, dst []byte) error
	WriteBlock(p kvcache.Place, src []byte) error
}

// BlockFormat is what a block's bytes hold.
type BlockFormat struct {
	// Geometry is the KV cache's shape and element type (the one KV-size
	// accounting, kvcache.Geometry).
	Geometry kvcache.Geometry
	// BlockSize is tokens per block.
	BlockSize int
	// Contents is false for an executor that holds no KV (the sim).
	Contents bool
	// StateBytes is one sequence's recurrent state in bytes (StateIO),
	// which moves beside a hybrid model's blocks; 0 for other models.
	StateBytes int
}

// BlockBytes is the size of one block's bytes, 0 without contents.
func (f BlockFormat) BlockBytes() int {
	if !f.Contents {
		return 0
	}
	return int(f.Geometry.BytesPerBlock(f.BlockSize))
}

// Compatible reports why blocks of format g cannot be written into an
// executor of format f: another geometry, element type or block size, one
// side holding contents and the other not, or recurrent states of another
// size.
func (f BlockFormat) Compatible(g BlockFormat) error {
	switch {
	case f.BlockSize != g.BlockSize:
		return fmt.Errorf("KV blocks of %d tokens, this pod's hold %d", g.BlockSize, f.BlockSize)
	case f.Geometry.DType != g.Geometry.DType:
		return fmt.Errorf("KV cache dtype %s, this pod's is %s", g.Geometry.DType, f.Geometry.DType)
	case f.Geometry != g.Geometry:
		return fmt.Errorf("KV geometry %d layers × %d KV heads × %d, this pod's is %d × %d × %d",
			g.Geometry.Layers, g.Geometry.KVHeads, g.Geometry.HeadDim, f.Geometry.Layers, f.Geometry.KVHeads, f.Geometry.HeadDim)
	case f.Contents != g.Contents:
		return fmt.Errorf("KV blocks with contents %v, this pod's executor %v", g.Contents, f.Contents)
	case f.StateBytes != g.StateBytes:
		return fmt.Errorf("recurrent states of %d bytes, this pod's hold %d", g.StateBytes, f.StateBytes)
	}
	if err := f.Geometry.Validate(); err != nil && f.Contents {
		return err
	}
	return nil
}

// ValidatePlace checks a place against an executor's numBlocks device
// blocks and hostBlocks host slots.
func ValidatePlace(p kvcache.Place, numBlocks, hostBlocks int) error {
	if p.OnHost {
		if p.Slot < 0 || int(p.Slot) >= hostBlocks {
			return fmt.Errorf("host slot %d outside %d", p.Slot, hostBlocks)
		}
		return nil
	}
	if p.Block < 0 || int(p.Block) >= numBlocks {
		return fmt.Errorf("block %d outside %d", p.Block, numBlocks)
	}
	return nil
}
