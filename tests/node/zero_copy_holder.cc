// zero_copy_holder: a local client that takes something from a node's
// zero-copy channel and holds it until it is killed, for the tests of what a
// node does when such a client dies.
//   zero_copy_holder SOCKET lease KEY_HEX    lease the key's object
//   zero_copy_holder SOCKET reserve BYTES    reserve arena space, never commit
// Prints "held" once it holds it; exits 1 when it cannot.
#include <unistd.h>

#include <iostream>
#include <string>

#include "pikv/rpc/zero_copy_client.h"

int main(int argc, char** argv) {
  using pikv::rpc::ZeroCopyClient;
  if (argc != 4) return 2;
  const std::string mode = argv[2], arg = argv[3];
  auto client = ZeroCopyClient::Connect(argv[1], std::chrono::seconds(10));
  if (!client.ok()) {
    std::cerr << client.status().ToString() << "\n";
    return 1;
  }
  std::optional<ZeroCopyClient::Leased> leased;
  std::optional<ZeroCopyClient::Space> space;
  if (mode == "lease") {
    auto key = pikv::ChunkKey::FromHex(arg);
    if (!key) return 2;
    auto got = (*client)->Lease({&*key, 1}, std::chrono::seconds(10));
    if (!got.ok() || !got->objects[0].ok()) return 1;
    leased = std::move(*got);
  } else if (mode == "reserve") {
    auto got = (*client)->Reserve(std::stoull(arg), std::chrono::seconds(10));
    if (!got.ok()) return 1;
    space = std::move(*got);
  } else {
    return 2;
  }
  std::cout << "held" << std::endl;
  while (true) pause();
}
