#define BOOST_TEST_MODULE net_tls
#include <boost/test/unit_test.hpp>
