// Engine: an inference engine stand-in for tests, benchmarks and the demo.
// It answers chunked prompts with a pikv Client and the fp32 reference model:
// plan, fetch the hits, compute only the misses (alone, at virtual position 0)
// and store them, remap everything into a paged cache under a shuffled block
// table, and run the question over it. It reports the plan and where the time
// went.
#pragma once

#include <chrono>
#include <vector>

#include "pikv/client/client.h"
#include "pikv/device/reference_model.h"

namespace pikv::testing {

class Engine {
 public:
  Engine(const device::ReferenceModel& model, client::ClientOptions options);

  struct Answer {
    client::Plan plan;
    std::vector<float> logits;  // [question token][vocab]
    std::vector<bool> reused;   // per chunk: served from pikv (else computed)
    std::chrono::microseconds plan_time{0}, fetch_time{0}, remap_time{0}, compute_time{0},
        question_time{0};
    uint64_t tokens_reused = 0, tokens_computed = 0;
  };
  // Computed misses are stored; a failed store only costs a recompute later.
  Answer Run(const client::ChunkedPrompt& prompt);

  client::Client& client() { return client_; }

 private:
  const device::ReferenceModel& model_;
  client::Client client_;
};

// The question's logits from scratch under the isolated chunk mask.
std::vector<float> ScratchLogits(const device::ReferenceModel& model,
                                 const client::ChunkedPrompt& prompt);

}  // namespace pikv::testing
