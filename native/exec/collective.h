// collective.h — the collective op kinds of sequence parallelism (dispatch.h:
// RING_ATTENTION, RING_ATTENTION_BACKWARD, ALL_REDUCE), run by the executor
// with its rank's communicator instead of run_op.
//
// Takes: an OpCall whose float operands point at this rank's buffers (the
//        executor has widened fp16/bf16 operands to float), the rank's
//        Communicator (every rank of the ring runs the same op with the same
//        shapes: the plan is shared) and a tag range reserved for this op.
// Gives: true and the outputs written, or false and a one-line message (a bad
//        shape, a communicator of the wrong size, a CommError naming the peer).
// Keeps: messages of one op never match another op's, even when two
//        collectives run at once on different streams (tags [tag_base,
//        tag_base + collective_tag_span(P)) belong to one op id).
#pragma once
#include <cstdint>
#include <string>

#include "../kernels/dispatch.h"
#include "../ring/comm.h"

namespace tiercut {

bool is_collective(int32_t kind);

// Tags one collective op of a ring of `ranks` may use (ring attention: 2P + 2).
int collective_tag_span(int ranks);

// What one collective call measured (compiler/ir/ops.ts predicts both exactly:
// ringSendBytes, ringWorkspaceBytes).
struct CollectiveStats {
  int64_t sent_bytes = 0;       // added to: bytes this rank sent to the next rank
  int64_t workspace_bytes = 0;  // raised to: this call's memory outside the arenas (head-major
                                // scratch, the ring kernel's own buffers, the all-reduce's receive chunk)
};

bool run_collective(ring::Communicator& comm, const OpCall& call, int tag_base, CollectiveStats* stats, std::string* err);

}  // namespace tiercut
