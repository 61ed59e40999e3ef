#include "pikv/launch/etcd_certs.h"

#include <arpa/inet.h>

#include <filesystem>
#include <fstream>

#include "pikv/launch/process.h"

namespace pikv::launch {

namespace {

namespace fs = std::filesystem;

bool IsAddress(const std::string& name) {
  unsigned char buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

std::string Config(const std::vector<std::string>& names) {
  std::string san;
  for (const auto& n : names)
    san += std::string(san.empty() ? "" : ",") + (IsAddress(n) ? "IP:" : "DNS:") + n;
  return "[req]\ndistinguished_name = dn\n[dn]\n"
         "[ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n"
         "[server]\nbasicConstraints = critical,CA:FALSE\nsubjectAltName = " +
         san +
         "\nextendedKeyUsage = serverAuth,clientAuth\n"
         "[client]\nbasicConstraints = critical,CA:FALSE\nextendedKeyUsage = clientAuth\n";
}

// One key pair and certificate: self-signed (the CA) or signed by the CA.
Status MakeCert(const fs::path& dir, const std::string& name, const std::string& subject) {
  std::error_code ec;
  // A certificate already there is kept; the CA's key may have been taken
  // off the host once the others were made.
  if (fs::exists(dir / (name + ".crt"), ec) &&
      (name == "ca" || fs::exists(dir / (name + ".key"), ec)))
    return Status::Ok();
  if (name != "ca" && !fs::exists(dir / "ca.key", ec))
    return InvalidArgument("making " + name + ".crt needs the CA's key, " +
                           (dir / "ca.key").string());
  std::vector<std::string> args = {"req",
                                   "-x509",
                                   "-config",
                                   (dir / "openssl.cnf").string(),
                                   "-extensions",
                                   name,
                                   "-newkey",
                                   "ec",
                                   "-pkeyopt",
                                   "ec_paramgen_curve:prime256v1",
                                   "-noenc",
                                   "-days",
                                   "3650",
                                   "-subj",
                                   "/CN=" + subject,
                                   "-keyout",
                                   (dir / (name + ".key")).string(),
                                   "-out",
                                   (dir / (name + ".crt")).string()};
  if (name != "ca") {
    args.insert(args.end(),
                {"-CA", (dir / "ca.crt").string(), "-CAkey", (dir / "ca.key").string()});
  }
  try {
    ChildProcess openssl("openssl", args);
    while (openssl.ReadLine(std::chrono::seconds(30))) {
    }
    const auto rc = openssl.Wait(std::chrono::seconds(30));
    if (rc == 127) return Unavailable("openssl is not installed (apt-get install openssl)");
    if (rc != 0) return IoError("openssl could not make " + name + ".crt in " + dir.string());
  } catch (const std::exception& e) {
    return IoError(std::string("openssl: ") + e.what());
  }
  fs::permissions(dir / (name + ".key"), fs::perms::owner_read | fs::perms::owner_write, ec);
  return ec ? IoError("chmod " + name + ".key: " + ec.message()) : Status::Ok();
}

}  // namespace

Status WriteEtcdCerts(const std::string& dir, const std::vector<std::string>& names) {
  if (names.empty()) return InvalidArgument("etcd's certificate needs at least one name");
  for (const auto& n : names) {
    if (n.empty() || n.find_first_of(",\n =/") != std::string::npos)
      return InvalidArgument("not a host name or address: '" + n + "'");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("cannot make " + dir + ": " + ec.message());
  {
    std::ofstream cnf(fs::path(dir) / "openssl.cnf");
    cnf << Config(names);
    if (!cnf) return IoError("cannot write " + dir + "/openssl.cnf");
  }
  for (const auto& [name, subject] :
       {std::pair{"ca", "pikv-etcd-ca"}, {"server", "etcd"}, {"client", "pikv"}}) {
    if (Status s = MakeCert(dir, name, subject); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace pikv::launch
