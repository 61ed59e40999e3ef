#include "lease_table.h"

namespace pikv::node {

Status LeaseTable::WithinShareLocked(uint64_t client, uint64_t bytes) {
  auto it = client_bytes_.find(client);
  const uint64_t held = it == client_bytes_.end() ? 0 : it->second;
  if (held + bytes <= options_.max_client_bytes) return Status::Ok();
  stats_.refused++;
  return Rejected("this client already holds " + std::to_string(held) + " bytes of the arena (" +
                  std::to_string(options_.max_client_bytes) + " at most)");
}

Status LeaseTable::WithinShare(uint64_t client, uint64_t bytes) {
  MutexLock lock(mu_);
  return WithinShareLocked(client, bytes);
}

Result<uint64_t> LeaseTable::Add(Loan loan) {
  MutexLock lock(mu_);
  if (Status s = WithinShareLocked(loan.client, loan.bytes); !s.ok()) return s;
  client_bytes_[loan.client] += loan.bytes;
  stats_.granted++;
  const uint64_t id = next_id_++;
  loans_.emplace(id, std::move(loan));
  return id;
}

Result<uint64_t> LeaseTable::Lease(uint64_t client, std::vector<SharedBuffer> objects,
                                   Clock::time_point now) {
  Loan loan;
  loan.client = client;
  loan.expiry = now + options_.ttl;
  for (const auto& o : objects) loan.bytes += o.size();
  loan.objects = std::move(objects);
  return Add(std::move(loan));
}

Result<uint64_t> LeaseTable::Reserve(uint64_t client, storage::CpuTier::Reservation space,
                                     Clock::time_point now) {
  Loan loan;
  loan.client = client;
  loan.expiry = now + options_.ttl;
  loan.bytes = space.size;
  loan.reserved = {std::move(space), std::make_shared<SealAhead>()};
  return Add(std::move(loan));
}

LeaseTable::Loan LeaseTable::EraseLocked(std::unordered_map<uint64_t, Loan>::iterator it) {
  Loan loan = std::move(it->second);
  loans_.erase(it);
  if ((client_bytes_[loan.client] -= loan.bytes) == 0) client_bytes_.erase(loan.client);
  return loan;
}

const LeaseTable::Loan* LeaseTable::FindReservationLocked(uint64_t client, uint64_t id) const {
  auto it = loans_.find(id);
  if (it == loans_.end() || it->second.client != client || !it->second.reserved.space.block)
    return nullptr;
  return &it->second;
}

namespace {
Status NoReservation(uint64_t id) {
  return NotFound("no reservation " + std::to_string(id) + " (expired or not this client's)");
}
}  // namespace

Result<LeaseTable::Reserved> LeaseTable::TakeReservation(uint64_t client, uint64_t id) {
  Loan taken;
  {
    MutexLock lock(mu_);
    if (!FindReservationLocked(client, id)) return NoReservation(id);
    taken = EraseLocked(loans_.find(id));
  }
  return std::move(taken.reserved);
}

Result<LeaseTable::Reserved> LeaseTable::FindReservation(uint64_t client, uint64_t id) const {
  MutexLock lock(mu_);
  const Loan* loan = FindReservationLocked(client, id);
  if (!loan) return NoReservation(id);
  return loan->reserved;
}

bool LeaseTable::Release(uint64_t client, uint64_t id) {
  Loan released;  // destroyed after the lock: that is where memory returns
  MutexLock lock(mu_);
  auto it = loans_.find(id);
  if (it == loans_.end() || it->second.client != client) return false;
  released = EraseLocked(it);
  stats_.released++;
  return true;
}

size_t LeaseTable::EndWhere(const std::function<bool(const Loan&)>& ends,
                            uint64_t Stats::*counter) {
  std::vector<Loan> ended;  // destroyed after the lock
  MutexLock lock(mu_);
  for (auto it = loans_.begin(); it != loans_.end();) {
    auto next = std::next(it);
    if (ends(it->second)) ended.push_back(EraseLocked(it));
    it = next;
  }
  stats_.*counter += ended.size();
  return ended.size();
}

void LeaseTable::DropClient(uint64_t client) {
  EndWhere([client](const Loan& l) { return l.client == client; }, &Stats::dropped);
}

size_t LeaseTable::Expire(Clock::time_point now) {
  return EndWhere([now](const Loan& l) { return l.expiry <= now; }, &Stats::expired);
}

LeaseTable::Stats LeaseTable::stats() const {
  MutexLock lock(mu_);
  Stats s = stats_;
  for (const auto& [id, loan] : loans_) {
    (loan.reserved.space.block ? s.reservations : s.leases)++;
    s.lent_bytes += loan.bytes;
  }
  return s;
}

}  // namespace pikv::node
