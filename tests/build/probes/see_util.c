#include "util/config.h"
