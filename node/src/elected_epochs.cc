#include "pikv/node/elected_epochs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

#include "pikv/proto/control_wire.h"

namespace pikv::node {

bool ElectedEpochs::Current(const Header& h, const std::string& endpoint, bool adopting,
                            Clock::time_point now) {
  const ControllerEpoch stamp = EpochOf(h);
  const int64_t ttl_ms = stamp.elected_ttl_ms;
  if (ttl_ms == 0) return true;
  const std::string text = stamp.epoch.value_or("");
  int64_t epoch = 0;
  if (std::from_chars(text.data(), text.data() + text.size(), epoch).ec != std::errc()) {
    spdlog::warn("reporter: ignored {} with epoch '{}'", MsgTypeName(h.type), text);
    return false;
  }
  if (epoch < newest_ && !(adopting && Rewound(endpoint, epoch, ttl_ms, now))) {
    spdlog::warn("reporter: ignored {} from a deposed leader (epoch {}, newest seen {})",
                 MsgTypeName(h.type), text, newest_);
    return false;
  }
  if (adopting) {
    if (epoch < newest_) {
      spdlog::warn(
          "reporter: {} has claimed epoch {} (below {}) for two leases: etcd's history "
          "was rewound (wiped or restored); following it",
          endpoint, epoch, newest_);
    }
    newest_ = epoch;
    lower_claim_.reset();
  }
  return true;
}

bool ElectedEpochs::Rewound(const std::string& endpoint, int64_t epoch, int64_t ttl_ms,
                            Clock::time_point now) {
  if (ttl_ms < kMinLeaseMs) return false;
  const auto lease = std::chrono::milliseconds(std::min<int64_t>(ttl_ms, kMaxLeaseMs));
  if (!lower_claim_ || lower_claim_->endpoint != endpoint || lower_claim_->epoch != epoch ||
      now - lower_claim_->last > lease) {
    lower_claim_ = LowerClaim{endpoint, epoch, now, now};
    return false;
  }
  lower_claim_->last = now;
  return now - lower_claim_->since >= 2 * lease;
}

}  // namespace pikv::node
