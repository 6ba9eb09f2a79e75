#include "deepinfer/LaunchTally.h"

namespace deepinfer {

LaunchTally& threadLaunchTally() {
  thread_local LaunchTally tally;
  return tally;
}

}  // namespace deepinfer
