// A program of another project, built against the installed package: it
// plans a chunked prompt with pikv's client the way an engine starts to,
// against a local node that is not there, so every chunk is a miss.
// Prints the version and the plan; exits 0 when the plan is what it must be.
#include <iostream>

#include "pikv/client/client.h"
#include "pikv/common/version.h"

int main() {
  std::cout << pikv::VersionLine("consumer") << "\n";
  pikv::client::ClientOptions options;
  options.local_node = "tcp://127.0.0.1:1";  // nobody listens: a miss, not an error
  options.model_id = "consumer-model";
  options.num_layers = 2;
  options.num_kv_heads = 2;
  options.head_dim = 64;
  pikv::device::RopeSpec rope;
  rope.head_dim = rope.rotary_dim = 64;
  options.rope = rope;
  pikv::client::Client client(options);
  pikv::client::ChunkedPrompt prompt;
  prompt.segments = {{1, 2, 3}, {4, 5, 6, 7}, {8, 9}, {10}};  // system, 2 chunks, question
  const auto plan = client.MakePlan(prompt);
  for (const auto& c : plan.chunks) {
    std::cout << "chunk " << c.segment << " " << c.key.Hex() << " at " << c.actual_start << " "
              << pikv::client::SourceName(c.source) << "\n";
  }
  const bool ok = plan.chunks.size() == 3 && plan.chunks[2].actual_start == 7 &&
                  plan.chunks[1].key == client.KeyOf(prompt.segments[1]);
  return ok ? 0 : 1;
}
