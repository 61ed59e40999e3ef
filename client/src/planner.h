// The planner: which source each chunk of a prompt is fetched from.
//
// One batched `exists` on the local node and one `locate` on the controller
// give each chunk a source, cheapest first: kLocal (this node's CPU or disk)
// -> kPeer (another live node's CPU or disk) -> kRemote (the remote tier,
// Redis, through the local node) -> kMiss. A channel that does not answer
// only narrows the plan (Plan::local_node_answered, controller_answered).
#pragma once

#include "channels.h"
#include "pikv/client/client.h"
#include "pikv/client/client_stats.h"
#include "pikv/client/prompt.h"

namespace pikv::client {

// `client` names the chunks (KeyOf) and gives the settings; `stats` counts
// the plan, its chunks by source and the channels' timeouts.
Plan BuildPlan(const ChunkedPrompt& prompt, const Client& client, Channels& channels,
               ClientStats& stats);

// The prompt's chunks keyed and placed, every source kMiss: asks nobody.
Plan PlanKeys(const ChunkedPrompt& prompt, const Client& client);

// The plan whose sources were decided elsewhere (Client::PlanFrom).
Result<Plan> PlanFromSources(const ChunkedPrompt& prompt, const Client& client,
                             std::span<const PlannedSource> sources);

}  // namespace pikv::client
